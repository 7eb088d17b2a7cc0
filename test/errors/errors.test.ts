import { format } from 'node:util';
import Router from '@koa/router';
import test from 'ava';
import Koa from 'koa';
import type { Middleware } from 'koa';
import { koaBody } from 'koa-body';
import { anthropicErrors } from '../../lib/errors/anthropic-errors.js';
import { errors, GatewayError, StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { requestDialect } from '../../lib/errors/request-dialect.js';
import { newRequestId } from '../../lib/errors/request-id.js';
import { listModels } from '../../lib/models/list-models.js';
import { underPath } from '../../lib/under-path.js';
import { listen } from '../helpers/http.js';
import { CATALOG } from '../helpers/models-app.js';

// The gateway's errors: GatewayError, its rows, the two answer shapes and the formatters that
// write them, gatewayErrors() choosing between them, and request ids.

// gatewayErrors() alone, no routes at all: every answer is the formatter's, so the shape is decided
// by the path alone. Its server starts with the file and its tests wait for it: no top-level await
// (AVA takes no test declared after one, and the file shares a worker: test/groups/units.ts).
const unroutedApp = new Koa();
unroutedApp.use(gatewayErrors());
const unrouted = listen(unroutedApp);
test.after.always(async () => (await unrouted).close());

// The formatters.

const ID = /^req_[A-Za-z0-9]{32}$/;

/** Serves one request through `formatter` and then `handler`, returning the response. */
async function respond(formatter: Middleware, handler: Middleware, init: RequestInit & { path?: string } = {}) {
  const app = new Koa();
  const reported: Array<{ err: unknown; requestId: unknown }> = [];
  app.on('error', (err, ctx) => reported.push({ err, requestId: ctx?.state.requestId }));
  app.use(formatter);
  app.use(handler);
  const server = await listen(app);
  try {
    const res = await fetch(server.url + (init.path ?? '/v1/thing'), init);
    return { res, text: await res.text(), reported };
  } finally {
    await server.close();
  }
}

test('Shape A: a GatewayError becomes {error:{message,type,param:null,code}} with its status', async (t) => {
  const { res, text } = await respond(openAIErrors(), () => {
    throw errors.fileNotFound();
  });
  t.is(res.status, 404);
  t.deepEqual(JSON.parse(text), { error: { message: 'File not found', type: 'invalid_request_error', param: null, code: 'file_not_found' } });
  t.regex(res.headers.get('x-request-id') ?? '', ID);
  t.regex(res.headers.get('content-type') ?? '', /^application\/json/);
});

test('Shape A: successes carry X-Request-Id too, and ids differ per request', async (t) => {
  const ok: Middleware = (ctx) => {
    ctx.body = { id: ctx.state.requestId };
  };
  const first = await respond(openAIErrors(), ok);
  const second = await respond(openAIErrors(), ok);
  t.is(first.res.status, 200);
  t.regex(first.res.headers.get('x-request-id') ?? '', ID);
  t.is(JSON.parse(first.text).id, first.res.headers.get('x-request-id'));
  t.not(first.res.headers.get('x-request-id'), second.res.headers.get('x-request-id'));
});

test('a client-sent request id is never taken as ours, in either shape', async (t) => {
  const theirs = 'req_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
  const spoof = { headers: { 'x-request-id': theirs, 'request-id': theirs } };
  const shapeA = await respond(openAIErrors(), (ctx) => (ctx.body = {}), spoof);
  t.regex(shapeA.res.headers.get('x-request-id') ?? '', ID);
  t.not(shapeA.res.headers.get('x-request-id'), theirs);
  const answers: Middleware[] = [
    (ctx) => {
      ctx.body = {};
    },
    () => {
      throw errors.invalidApiKey();
    },
  ];
  for (const handler of answers) {
    const shapeB = await respond(anthropicErrors(), handler, spoof);
    t.regex(shapeB.res.headers.get('request-id') ?? '', ID);
    t.not(shapeB.res.headers.get('request-id'), theirs);
    t.false(shapeB.text.includes(theirs));
  }
});

test('Shape B: {type:"error",error:{type,message},request_id} with request-id equal to request_id', async (t) => {
  const { res, text } = await respond(anthropicErrors(), () => {
    throw errors.modelNotFound();
  });
  const body = JSON.parse(text);
  t.is(res.status, 404);
  t.deepEqual(body, { type: 'error', error: { type: 'not_found_error', message: 'Model not found' }, request_id: body.request_id });
  t.regex(body.request_id, ID);
  t.is(res.headers.get('request-id'), body.request_id);
});

const shapeBTypes: Array<[string, () => Error, number, string]> = [
  ['401', errors.invalidApiKey, 401, 'authentication_error'],
  ['403', errors.forbidden, 403, 'permission_error'],
  ['400', errors.invalidFileId, 400, 'invalid_request_error'],
  ['413', errors.requestTooLarge, 413, 'request_too_large'],
  ['429', () => errors.createRateExceeded(5), 429, 'rate_limit_error'],
  ['500', errors.internal, 500, 'api_error'],
  ['502', errors.upstreamError, 502, 'api_error'],
  ['504', errors.upstreamTimeout, 504, 'api_error'],
];
for (const [title, make, status, type] of shapeBTypes) {
  test(`Shape B: ${title} answers with Anthropic's type ${type}`, async (t) => {
    const { res, text } = await respond(anthropicErrors(), () => {
      throw make();
    });
    t.is(res.status, status);
    t.is(JSON.parse(text).error.type, type);
  });
}

test('headers that belong to the error survive; headers set before it do not', async (t) => {
  const { res } = await respond(openAIErrors(), (ctx) => {
    ctx.set('Content-Disposition', 'attachment; filename="x.pdf"');
    throw errors.createRateExceeded(42);
  });
  t.is(res.status, 429);
  t.is(res.headers.get('retry-after'), '42');
  t.is(res.headers.get('content-disposition'), null);
  t.regex(res.headers.get('x-request-id') ?? '', ID);
});

test('a Connection: close set on the way to the error (a shutdown under way) is kept', async (t) => {
  const { res } = await respond(openAIErrors(), (ctx) => {
    ctx.set('Connection', 'close');
    throw errors.fileNotFound();
  });
  t.is(res.status, 404);
  t.is(res.headers.get('connection'), 'close');
});

test('an error response keeps the headers set before the formatter, with the values they had then', async (t) => {
  const app = new Koa();
  app.use((ctx, next) => {
    ctx.set('Access-Control-Allow-Origin', 'https://app.example');
    ctx.set('Content-Security-Policy', "default-src 'none'");
    return next();
  });
  app.use(openAIErrors());
  app.use((ctx) => {
    // A download that fails after it set its own headers.
    ctx.set('Content-Security-Policy', 'sandbox');
    ctx.set('Content-Disposition', 'attachment; filename="x.pdf"');
    throw errors.fileNotFound();
  });
  const server = await listen(app);
  try {
    const res = await fetch(`${server.url}/v1/files/x/content`);
    t.is(res.status, 404);
    t.is(res.headers.get('access-control-allow-origin'), 'https://app.example');
    t.is(res.headers.get('content-security-policy'), "default-src 'none'");
    t.is(res.headers.get('content-disposition'), null);
    t.regex(res.headers.get('x-request-id') ?? '', ID);
    t.regex(res.headers.get('content-type') ?? '', /^application\/json/);
  } finally {
    await server.close();
  }
});

test('anything unexpected is a 500 without detail, reported on app "error" with the request id', async (t) => {
  const { res, text, reported } = await respond(openAIErrors(), () => {
    throw new Error('secret detail: password=hunter2 at /srv/app/db.ts');
  });
  t.is(res.status, 500);
  t.deepEqual(JSON.parse(text), { error: { message: 'Internal server error', type: 'server_error', param: null, code: 'internal_error' } });
  t.false(text.includes('hunter2'));
  t.is(reported.length, 1);
  t.is(reported[0]?.requestId, res.headers.get('x-request-id'));
  t.regex(String((reported[0]!.err as Error).message), /hunter2/);
});

const unreachable: Array<[string, () => unknown]> = [
  ['StoreUnavailableError', () => new StoreUnavailableError()],
  ['ECONNREFUSED', () => Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5432'), { code: 'ECONNREFUSED' })],
  ['a Knex pool timeout', () => Object.assign(new Error('Knex: Timeout acquiring a connection'), { name: 'KnexTimeoutError' })],
  ['a wrapped cause', () => new Error('query failed', { cause: Object.assign(new Error('x'), { code: 'ETIMEDOUT' }) })],
];
for (const [title, make] of unreachable) {
  test(`an unreachable store (${title}) is 503 service_unavailable without detail, reported as the 503 caused by it`, async (t) => {
    const thrown = make();
    const { res, text, reported } = await respond(openAIErrors(), () => {
      throw thrown;
    });
    t.is(res.status, 503);
    t.deepEqual(JSON.parse(text), {
      error: { message: 'Service temporarily unavailable', type: 'server_error', param: null, code: 'service_unavailable' },
    });
    t.false(text.includes('10.0.0.5'));
    t.is(reported.length, 1);
    t.is(reported[0]?.requestId, res.headers.get('x-request-id'));
    t.like(reported[0]?.err, { status: 503, code: 'service_unavailable', cause: thrown });
  });
}

test("a parser's HTTP errors map to our rows with our wording: invalid JSON is 400", async (t) => {
  const { res, text } = await respond(openAIErrors(), koaBody(), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"model": "x", <script>',
  });
  t.deepEqual(
    { status: res.status, body: JSON.parse(text) as unknown },
    {
      status: 400,
      body: { error: { message: 'The request could not be parsed', type: 'invalid_request_error', param: null, code: 'invalid_request' } },
    },
  );
});

test("a parser's 413 maps to request_too_large", async (t) => {
  const { res, text } = await respond(openAIErrors(), koaBody({ jsonLimit: 10 }), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ padding: 'x'.repeat(100) }),
  });
  t.deepEqual(
    { status: res.status, body: JSON.parse(text) as unknown },
    {
      status: 413,
      body: { error: { message: 'Request body is too large', type: 'invalid_request_error', param: null, code: 'request_too_large' } },
    },
  );
});

test("a parser's 415 (an unknown Content-Encoding) maps to unsupported_media_type", async (t) => {
  const { res, text } = await respond(openAIErrors(), koaBody(), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-encoding': 'klingon' },
    body: '{}',
  });
  t.deepEqual(
    { status: res.status, body: JSON.parse(text) as unknown },
    {
      status: 415,
      body: { error: { message: 'Unsupported request body encoding', type: 'invalid_request_error', param: null, code: 'unsupported_media_type' } },
    },
  );
});

test('an unmatched request is 404 unknown_url naming the method and path', async (t) => {
  const { res, text } = await respond(openAIErrors(), async (_ctx, next) => next(), { method: 'DELETE', path: '/v1/nope' });
  t.is(res.status, 404);
  t.deepEqual(JSON.parse(text), {
    error: { message: 'Unknown request URL: DELETE /v1/nope', type: 'invalid_request_error', param: null, code: 'unknown_url' },
  });
});

test('a Shape B formatter nested in a Shape A app keeps the one request id of the request', async (t) => {
  const inner = anthropicErrors();
  let seen: string | undefined;
  const { text, res } = await respond(openAIErrors(), (ctx, next) => {
    seen = ctx.state.requestId;
    return inner(ctx, async () => {
      await next();
      throw errors.invalidApiKey();
    });
  });
  t.regex(seen ?? '', ID);
  t.is(JSON.parse(text).request_id, seen);
  t.is(res.headers.get('request-id'), seen ?? null);
});

// Every row of api.md section 7 and decisions.md: status, type, code and exact message.
const rows: Array<[string, Error & { status?: number; type?: string; code?: string }, number, string, string, string | RegExp]> = [
  ['invalid key', errors.invalidApiKey(), 401, 'authentication_error', 'invalid_api_key', 'Invalid API key'],
  ['missing scope', errors.forbidden(), 403, 'permission_error', 'forbidden', 'Forbidden'],
  ['model outside allowlist', errors.modelNotAllowed('gpt-x'), 403, 'permission_error', 'forbidden', "Model 'gpt-x' is not allowed for this API key"],
  ['messages model', errors.modelNotFound(), 404, 'invalid_request_error', 'model_not_found', 'Model not found'],
  ['chat unknown model', errors.modelDoesNotExist('gpt-x'), 404, 'invalid_request_error', 'model_not_found', "The model 'gpt-x' does not exist"],
  ['file not found', errors.fileNotFound(), 404, 'invalid_request_error', 'file_not_found', 'File not found'],
  ['bad file id', errors.invalidFileId(), 400, 'invalid_request_error', 'invalid_file_id', 'Invalid file ID'],
  ['too large', errors.fileTooLarge(), 413, 'invalid_request_error', 'file_too_large', 'File is too large'],
  ['content type', errors.invalidContentType('multipart/form-data'), 400, 'invalid_request_error', 'invalid_content_type', /multipart\/form-data/],
  ['media type', errors.unsupportedMediaType(), 415, 'invalid_request_error', 'unsupported_media_type', 'Unsupported request body encoding'],
  ['encoding', errors.unsupportedContentEncoding(), 415, 'invalid_request_error', 'unsupported_content_encoding', /uncompressed/],
  ['missing file', errors.missingFile(), 400, 'invalid_request_error', 'missing_file', /file/],
  ['purpose', errors.invalidPurpose(), 400, 'invalid_request_error', 'invalid_purpose', /user_data/],
  ['file name', errors.invalidFileName(), 400, 'invalid_request_error', 'invalid_file_name', /\.pdf/],
  ['not a pdf', errors.invalidFileFormat(), 400, 'invalid_request_error', 'invalid_file_format', 'File is not a PDF'],
  ['expiry', errors.invalidExpiresAfter(), 400, 'invalid_request_error', 'invalid_expires_after', /3600.*2592000/],
  ['order', errors.invalidOrder(), 400, 'invalid_request_error', 'invalid_order', /'asc' or 'desc'/],
  ['limit', errors.invalidLimit(10000), 400, 'invalid_request_error', 'invalid_limit', /1 to 10000/],
  ['unknown url', errors.unknownUrl('GET', '/v1/x'), 404, 'invalid_request_error', 'unknown_url', 'Unknown request URL: GET /v1/x'],
  ['method', errors.methodNotAllowed('PUT'), 405, 'invalid_request_error', 'method_not_allowed', /PUT/],
  ['create rate', errors.createRateExceeded(3), 429, 'rate_limit_error', 'rate_limit_exceeded', 'Create rate exceeded'],
  ['ingestion', errors.ingestionQuotaExceeded(3), 429, 'rate_limit_error', 'ingestion_quota_exceeded', 'Ingestion quota exceeded'],
  ['storage', errors.storageQuotaExceeded(), 429, 'rate_limit_error', 'storage_quota_exceeded', 'Storage quota exceeded'],
  ['internal', errors.internal(), 500, 'server_error', 'internal_error', 'Internal server error'],
  ['unavailable', errors.serviceUnavailable(), 503, 'server_error', 'service_unavailable', 'Service temporarily unavailable'],
  ['upstream', errors.upstreamError(), 502, 'server_error', 'upstream_error', 'Upstream provider error'],
  ['upstream timeout', errors.upstreamTimeout(), 504, 'server_error', 'upstream_timeout', 'Upstream provider timed out'],
  ['upstream refusal', errors.upstreamRefused(422, 'bad_thing', 'no'), 422, 'invalid_request_error', 'bad_thing', 'no'],
  ['upstream 429', errors.upstreamRefused(429, undefined, 'slow down'), 429, 'rate_limit_error', 'upstream_error', 'slow down'],
];
for (const [title, err, status, type, code, message] of rows) {
  test(`error row: ${title}`, (t) => {
    t.like(err, { status, type, code });
    if (typeof message === 'string') t.is(err.message, message);
    else t.regex(err.message, message);
  });
}

test('429 rows carry the headers decisions.md names', (t) => {
  t.deepEqual(errors.createRateExceeded(7).headers, { 'retry-after': '7' });
  t.deepEqual(errors.ingestionQuotaExceeded(9).headers, { 'retry-after': '9' });
  t.deepEqual(errors.storageQuotaExceeded().headers, { 'x-should-retry': 'false' });
});

test('SQLite failing to open its file or to get the write lock is 503, not 500', async (t) => {
  for (const code of ['SQLITE_CANTOPEN', 'SQLITE_BUSY']) {
    const { res } = await respond(openAIErrors(), () => {
      throw Object.assign(new Error('unable to open database file'), { code });
    });
    t.is(res.status, 503, code);
  }
});

/** Sends `method` to /v1/thing on an app whose router has GET and DELETE there. */
async function routed(method: string) {
  const router = new Router();
  router.get('/v1/thing', (ctx) => (ctx.body = {}));
  router.delete('/v1/thing', (ctx) => (ctx.body = {}));
  const app = new Koa();
  app.use(openAIErrors());
  app.use(router.routes());
  app.use(router.allowedMethods());
  const server = await listen(app);
  try {
    const res = await fetch(`${server.url}/v1/thing`, { method });
    return { res, body: (await res.json()) as { error: Record<string, unknown> } };
  } finally {
    await server.close();
  }
}

test("a router's 405 (allowedMethods()) gets our body and keeps the Allow header HTTP requires", async (t) => {
  const { res, body } = await routed('PUT');
  t.is(res.status, 405);
  t.is(res.headers.get('allow'), 'HEAD, GET, DELETE');
  t.deepEqual(body, {
    error: { message: 'Method PUT is not allowed on this URL', type: 'invalid_request_error', param: null, code: 'method_not_allowed' },
  });
});

test('a method no route knows (501 from allowedMethods()) is answered as 405 too', async (t) => {
  const { res, body } = await routed('PROPFIND');
  t.is(res.status, 405);
  t.is(body.error.code, 'method_not_allowed');
});

// GatewayError.

test('a GatewayError is an Error to its readers, yet captures no stack and touches no global to avoid it', (t) => {
  const limit = Error.stackTraceLimit;
  let writes = 0;
  // Any write to the global while errors are made is seen here.
  Object.defineProperty(Error, 'stackTraceLimit', { configurable: true, get: () => limit, set: () => void writes++ });
  let err: GatewayError;
  try {
    err = errors.invalidApiKey();
  } finally {
    Object.defineProperty(Error, 'stackTraceLimit', { configurable: true, writable: true, value: limit });
  }
  t.is(writes, 0);
  t.true(err instanceof GatewayError);
  t.true(err instanceof Error);
  t.is(err.stack, undefined);
  t.is(String(err), 'GatewayError: Invalid API key');
  t.regex(format('%o', err), /GatewayError: Invalid API key/);
  t.like(err, { name: 'GatewayError', message: 'Invalid API key', status: 401, expose: true, code: 'invalid_api_key' });
});

// gatewayErrors(): the shape by path and header.

for (const path of ['/v1/messages', '/v1/messages/count_tokens', '/v1/messages/', '/v1/messages/batches/x']) {
  test(`${path}, known or not, answers in Shape B with request-id (decisions.md "Beyond the seed")`, async (t) => {
    const response = await fetch(`${(await unrouted).url}${path}`);
    const body = (await response.json()) as { type: string; error: { type: string; message: string }; request_id: string };
    t.is(response.status, 404);
    t.deepEqual(body, { type: 'error', error: { type: 'not_found_error', message: `Unknown request URL: GET ${path}` }, request_id: body.request_id });
    t.is(response.headers.get('request-id'), body.request_id);
    t.is(response.headers.get('x-request-id'), null);
  });
}

for (const path of ['/v1/models', '/v1/messagesx', '/v1/Messages', '/v2/messages']) {
  test(`${path} answers in Shape A with X-Request-Id`, async (t) => {
    const response = await fetch(`${(await unrouted).url}${path}`);
    t.like(await response.json(), { error: { code: 'unknown_url', param: null } });
    t.regex(response.headers.get('x-request-id') ?? '', /^req_/);
  });
}

for (const path of ['/v1/models', '/v1/models/echo-1', '/v1/files', '/v1/files/file-x/content']) {
  test(`${path} answers in Shape B with anthropic-version, in Shape A without it`, async (t) => {
    const anthropic = await fetch(`${(await unrouted).url}${path}`, { headers: { 'anthropic-version': '2023-06-01' } });
    const body = (await anthropic.json()) as { request_id: string };
    t.deepEqual(body, { type: 'error', error: { type: 'not_found_error', message: `Unknown request URL: GET ${path}` }, request_id: body.request_id });
    t.is(anthropic.headers.get('request-id'), body.request_id);
    const openai = await fetch(`${(await unrouted).url}${path}`);
    t.like(await openai.json(), { error: { code: 'unknown_url', param: null } });
    t.regex(openai.headers.get('x-request-id') ?? '', /^req_/);
  });
}

test('anthropicShape chooses Shape B per request', async (t) => {
  const custom = new Koa();
  custom.use(gatewayErrors({ anthropicShape: (ctx) => ctx.get('anthropic-version') !== '' }));
  const listening = await listen(custom);
  t.teardown(listening.close);
  const anthropic = await fetch(`${listening.url}/v1/models`, { headers: { 'anthropic-version': '2023-06-01' } });
  t.like(await anthropic.json(), { type: 'error', error: { type: 'not_found_error' } });
  t.like(await (await fetch(`${listening.url}/v1/models`)).json(), { error: { code: 'unknown_url' } });
});

/** GET /v1/models on an app whose key is in every request, after `decide` (the dialect's middleware). */
async function modelsListAfter(decide: Middleware) {
  const app = new Koa();
  app.use(decide);
  app.use((ctx, next) => {
    ctx.state.apiKey = { id: 'key_1', account: 'acme', scopes: ['models:read'], models: null };
    return next();
  });
  app.use(listModels({ catalog: CATALOG }));
  return listen(app);
}

test('the routers after gatewayErrors() answer in the dialect it decided, its own rule included', async (t) => {
  const listening = await modelsListAfter(gatewayErrors({ anthropicShape: (ctx) => ctx.get('x-dialect') === 'anthropic' }));
  t.teardown(listening.close);
  const asked = (headers: Record<string, string>) => fetch(`${listening.url}/v1/models`, { headers }).then((answer) => answer.json());
  t.like(await asked({ 'x-dialect': 'anthropic' }), { has_more: false, data: [{ type: 'model' }] });
  t.like(await asked({ 'anthropic-version': '2023-06-01' }), { object: 'list', data: [{ object: 'model' }] });
});

test('requestDialect() decides the dialect for a chain without gatewayErrors(); without either, anthropic-version does', async (t) => {
  const decided = await modelsListAfter(requestDialect({ anthropic: () => true }));
  t.teardown(decided.close);
  t.like(await (await fetch(`${decided.url}/v1/models`)).json(), { has_more: false });
  const undecided = await modelsListAfter((_ctx, next) => next());
  t.teardown(undecided.close);
  t.like(await (await fetch(`${undecided.url}/v1/models`)).json(), { object: 'list' });
  t.like(await (await fetch(`${undecided.url}/v1/models`, { headers: { 'anthropic-version': '2023-06-01' } })).json(), { has_more: false });
  t.throws(() => requestDialect({ anthropic: true as never }), {
    instanceOf: TypeError,
    message: 'koa-model-gateway: requestDialect(): anthropic must be a function of ctx',
  });
});

test('underPath runs its middleware for the prefix and the paths under it only, compared exactly', async (t) => {
  const seen: string[] = [];
  const paths = new Koa();
  paths.use(
    underPath('/v1', async (ctx, next) => {
      seen.push(ctx.path);
      await next();
    }),
  );
  paths.use((ctx) => {
    ctx.body = 'ok';
  });
  const listening = await listen(paths);
  t.teardown(listening.close);
  for (const path of ['/v1', '/v1/', '/v1/files/x', '/V1/files', '/v10', '/healthz']) await fetch(`${listening.url}${path}`);
  t.deepEqual(seen, ['/v1', '/v1/', '/v1/files/x']);
  t.throws(() => underPath('/v1/', async () => undefined), { instanceOf: TypeError });
});

// Request ids.

test('10,000 request ids are distinct and well-formed: req_ and 32 alphanumerics', (t) => {
  const ids = Array.from({ length: 10_000 }, () => newRequestId());
  for (const id of ids) t.regex(id, /^req_[A-Za-z0-9]{32}$/);
  t.is(new Set(ids).size, ids.length);
});
