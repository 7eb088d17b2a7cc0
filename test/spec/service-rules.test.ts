import { mkdir, rm } from 'node:fs/promises';
import test from 'ava';
import { SCOPES, type Scope } from '../../lib/auth/scopes.js';
import { makePdf } from '../helpers/models-pdf.js';
import { uploadForm } from '../helpers/multipart.js';
import { rawRequest } from '../helpers/raw-request.js';
import { referenceApp } from './reference-app.js';

// Rules of api.md and decisions.md about the whole service, on the reference server's own app
// (one per file). Each test uses an account of its own: the creation rate is per account.

const app = await referenceApp();
test.after.always(() => app.close());

const REQUEST_ID = /^req_[A-Za-z0-9]{32}$/;
const NEVER = 'file-000000AAAAAAAAAAAAAAAAAAAAAAAAAA';

interface CallOptions {
  key?: string;
  headers?: Record<string, string>;
  body?: RequestInit['body'];
}

const call = (method: string, path: string, options: CallOptions = {}) =>
  fetch(`${app.url}${path}`, {
    method,
    headers: { ...(options.key === undefined ? {} : { authorization: `Bearer ${options.key}` }), ...options.headers },
    ...(options.body === undefined ? {} : { body: options.body }),
  });

const upload = (key: string, pdf = makePdf(1), filename = 'report.pdf', expiresAfter?: number) =>
  call('POST', '/v1/files', { key, body: uploadForm(pdf, filename, expiresAfter) });

async function created(key: string, expiresAfter?: number): Promise<{ id: string; created_at: number; expires_at?: number }> {
  const response = await upload(key, makePdf(1), 'report.pdf', expiresAfter);
  if (response.status !== 200) throw new Error(`upload failed: ${response.status} ${await response.text()}`);
  return (await response.json()) as { id: string; created_at: number };
}

const json = (body: unknown) => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const chatBody = (extra: Record<string, unknown> = {}) => json({ model: 'echo-1', messages: [{ role: 'user', content: 'hi' }], ...extra });
const messagesBody = (extra: Record<string, unknown> = {}) =>
  json({ model: 'echo-1', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }], ...extra });

const shapeA = (type: string, code: string, message: string) => ({ error: { message, type, param: null, code } });
const FORBIDDEN_A = shapeA('permission_error', 'forbidden', 'Forbidden');
const INVALID_KEY_A = shapeA('authentication_error', 'invalid_api_key', 'Invalid API key');

/** A Shape B body, checked against its `request-id` header; returns the body without its id. */
async function shapeB(response: Response): Promise<{ status: number; body: unknown }> {
  const body = (await response.json()) as { request_id?: unknown };
  if (typeof body.request_id !== 'string' || !REQUEST_ID.test(body.request_id)) throw new Error(`no request_id: ${JSON.stringify(body)}`);
  if (response.headers.get('request-id') !== body.request_id) throw new Error('request-id header differs from request_id');
  return { status: response.status, body: { ...body, request_id: undefined } };
}

test.serial('/healthz and /readyz need no key; /readyz is 503 while the blob store is away, /healthz stays 200', async (t) => {
  t.deepEqual(await (await call('GET', '/readyz')).json(), { status: 'ok', checks: { database: 'ok', blobs: 'ok' } });
  await rm(app.config.filesDir, { recursive: true, force: true });
  try {
    const ready = await call('GET', '/readyz');
    t.is(ready.status, 503);
    t.deepEqual(await ready.json(), { status: 'unavailable', checks: { database: 'ok', blobs: 'unavailable' } });
    const health = await call('GET', '/healthz');
    t.is(health.status, 200, 'the process runs: healthz stays 200');
  } finally {
    await mkdir(app.config.filesDir, { recursive: true });
  }
  t.is((await call('GET', '/readyz')).status, 200, 'ready again once the blob store answers');
});

test('api.md section 5: each scope allows exactly its operations, on the reference server as composed', async (t) => {
  const account = 'scope-matrix';
  const owner = await app.keyFor(SCOPES, { account });
  const kept = await created(owner);
  const doomed = await created(owner);
  const operations: Array<{ scope: Scope; name: string; send: (key: string) => Promise<Response> }> = [
    { scope: 'files:write', name: 'POST /v1/files', send: (key) => upload(key) },
    { scope: 'files:read', name: 'GET /v1/files', send: (key) => call('GET', '/v1/files', { key }) },
    { scope: 'files:read', name: 'GET /v1/files/{id}', send: (key) => call('GET', `/v1/files/${kept.id}`, { key }) },
    { scope: 'files:read', name: 'GET /v1/files/{id}/content', send: (key) => call('GET', `/v1/files/${kept.id}/content`, { key }) },
    { scope: 'files:delete', name: 'DELETE /v1/files/{id}', send: (key) => call('DELETE', `/v1/files/${doomed.id}`, { key }) },
    { scope: 'chat:completions', name: 'POST /v1/chat/completions', send: (key) => call('POST', '/v1/chat/completions', { key, ...chatBody() }) },
    { scope: 'messages:create', name: 'POST /v1/messages', send: (key) => call('POST', '/v1/messages', { key, ...messagesBody() }) },
    { scope: 'models:read', name: 'GET /v1/models', send: (key) => call('GET', '/v1/models', { key }) },
  ];
  for (const scope of SCOPES) {
    const key = await app.keyFor([scope], { account });
    for (const operation of operations) {
      const response = await operation.send(key);
      const what = `${scope} on ${operation.name}`;
      if (operation.scope === scope) {
        t.is(response.status, 200, what);
        await response.arrayBuffer();
      } else if (operation.name === 'POST /v1/messages') {
        t.deepEqual(await shapeB(response), { status: 403, body: { type: 'error', error: { type: 'permission_error', message: 'Forbidden' }, request_id: undefined } }, what);
      } else {
        t.is(response.status, 403, what);
        t.deepEqual(await response.json(), FORBIDDEN_A, what);
      }
    }
  }
});

test('decisions.md Request ids: every Shape A response, success or error, carries its own X-Request-Id', async (t) => {
  const account = 'request-ids';
  const key = await app.keyFor(SCOPES, { account });
  const readOnly = await app.keyFor(['files:read'], { account });
  const file = await created(key);
  const doomed = await created(key);
  const responses: Array<[string, Response]> = [
    ['upload', await upload(key)],
    ['list', await call('GET', '/v1/files', { key })],
    ['retrieve', await call('GET', `/v1/files/${file.id}`, { key })],
    ['download', await call('GET', `/v1/files/${file.id}/content`, { key })],
    ['delete', await call('DELETE', `/v1/files/${doomed.id}`, { key })],
    ['models', await call('GET', '/v1/models', { key })],
    ['chat', await call('POST', '/v1/chat/completions', { key, ...chatBody() })],
    ['chat streamed', await call('POST', '/v1/chat/completions', { key, ...chatBody({ stream: true }) })],
    ['400 not a PDF', await upload(key, Buffer.from('not a pdf'))],
    ['400 malformed id', await call('GET', '/v1/files/not-an-id', { key })],
    ['400 invalid JSON', await call('POST', '/v1/chat/completions', { key, headers: { 'content-type': 'application/json' }, body: '{' })],
    ['401', await call('GET', '/v1/files')],
    ['403', await upload(readOnly)],
    ['404 file', await call('GET', `/v1/files/${NEVER}`, { key })],
    ['404 model', await call('POST', '/v1/chat/completions', { key, ...chatBody({ model: 'no-such-model' }) })],
    ['404 unknown url', await call('GET', '/v1/no-such-route', { key })],
    ['405', await call('PUT', '/v1/files', { key })],
  ];
  const ids = new Set<string>();
  for (const [what, response] of responses) {
    const id = response.headers.get('x-request-id') ?? '';
    t.regex(id, REQUEST_ID, what);
    ids.add(id);
    await response.arrayBuffer();
  }
  const tooLarge = await rawRequest(`${app.url}/v1/files`, {
    headers: { authorization: `Bearer ${key}`, 'content-type': 'multipart/form-data; boundary=x', 'content-length': String(10 * 1024 ** 3) },
    body: (function* () {
      for (;;) yield Buffer.alloc(64 * 1024);
    })(),
  });
  t.is(tooLarge.status, 413);
  t.regex(String(tooLarge.headers['x-request-id']), REQUEST_ID, '413');
  ids.add(String(tooLarge.headers['x-request-id']));
  t.is(ids.size, responses.length + 1, 'every response has an id of its own');
});

test('decisions.md Request ids: every /v1/messages response carries request-id, equal to the body request_id on errors', async (t) => {
  const account = 'messages-ids';
  const key = await app.keyFor(SCOPES, { account });
  const noMessages = await app.keyFor(['files:read'], { account });
  const allowlisted = await app.keyFor(SCOPES, { account, models: ['echo-1'] });
  const send = (options: CallOptions) => call('POST', '/v1/messages', options);

  const ids = new Set<string>();
  for (const response of [await send({ key, ...messagesBody() }), await send({ key, ...messagesBody({ stream: true }) })]) {
    t.is(response.status, 200);
    const id = response.headers.get('request-id') ?? '';
    t.regex(id, REQUEST_ID);
    ids.add(id);
    await response.arrayBuffer();
  }
  const errorCase = (status: number, type: string, message: string) => ({ status, body: { type: 'error', error: { type, message }, request_id: undefined } });
  const document = (fileId: string) => messagesBody({ messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: fileId } }] }] });
  const cases: Array<[Response, ReturnType<typeof errorCase>]> = [
    [await send({ key, headers: { 'content-type': 'application/json' }, body: '{"model":' }), errorCase(400, 'invalid_request_error', 'Request body must be valid JSON')],
    [await send({ key, ...document('file-nope') }), errorCase(400, 'invalid_request_error', 'Invalid file ID')],
    [await send({ ...messagesBody() }), errorCase(401, 'authentication_error', 'Invalid API key')],
    [await send({ key: noMessages, ...messagesBody() }), errorCase(403, 'permission_error', 'Forbidden')],
    [await send({ key: allowlisted, ...messagesBody({ model: 'echo-2' }) }), errorCase(404, 'not_found_error', 'Model not found')],
    [await send({ key, ...document(NEVER) }), errorCase(404, 'not_found_error', 'File not found')],
    [await send({ key, ...messagesBody({ padding: 'x'.repeat(10 * 1024 * 1024) }) }), errorCase(413, 'request_too_large', 'Request body is too large')],
  ];
  for (const [response, expected] of cases) {
    ids.add(response.headers.get('request-id') ?? '');
    t.deepEqual(await shapeB(response), expected);
  }
  t.is(ids.size, cases.length + 2, 'every response has an id of its own');
});

test('decisions.md Request ids: a client-sent id is never taken as ours; the log line carries ours', async (t) => {
  const key = await app.keyFor(SCOPES, { account: 'client-ids' });
  const theirs = 'req_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
  const spoof = { 'x-request-id': theirs, 'request-id': theirs };
  const shapeAResponses = [await call('GET', '/v1/files', { key, headers: spoof }), await call('GET', '/v1/models', { headers: spoof })];
  for (const response of shapeAResponses) {
    const ours = response.headers.get('x-request-id') ?? '';
    t.regex(ours, REQUEST_ID);
    t.not(ours, theirs);
    await response.arrayBuffer();
    const line = await app.logLine((entry) => entry.msg === 'request' && entry.requestId === ours);
    t.is(line.status, response.status);
  }
  for (const [options, status] of [
    [{ key, ...messagesBody() }, 200],
    [messagesBody(), 401],
  ] as const) {
    const response = await call('POST', '/v1/messages', { ...options, headers: { ...options.headers, ...spoof } });
    t.is(response.status, status);
    const ours = response.headers.get('request-id') ?? '';
    t.regex(ours, REQUEST_ID);
    t.not(ours, theirs);
    const body = (await response.json()) as { request_id?: string };
    if (status === 401) t.is(body.request_id, ours, 'an error body repeats the id');
    const line = await app.logLine((entry) => entry.msg === 'request' && entry.requestId === ours);
    t.is(line.status, status);
  }
  t.false(
    app.logs.some((entry) => entry.requestId === theirs),
    'no log line carries the client-sent id',
  );
});

test('decisions.md Errors: without an accepted key every /v1 route, known or not, answers 401, whatever else the request breaks', async (t) => {
  const noKey = await rawRequest(`${app.url}/v1/files`, {
    headers: { 'content-encoding': 'gzip', 'content-type': 'application/json', 'content-length': String(10 * 1024 ** 3) },
    body: (function* () {
      for (;;) yield Buffer.alloc(64 * 1024);
    })(),
  });
  t.is(noKey.status, 401);
  t.deepEqual(JSON.parse(noKey.body.toString('utf8')), INVALID_KEY_A);
  const routes: Array<[string, string]> = [
    ['POST', '/v1/files'],
    ['GET', '/v1/files?limit=0&order=sideways'],
    ['GET', `/v1/files/${NEVER}`],
    ['GET', '/v1/files/not-an-id/content'],
    ['DELETE', '/v1/files/not-an-id'],
    ['GET', '/v1/models'],
    ['GET', '/v1/models/no-such-model'],
    ['POST', '/v1/chat/completions'],
    ['POST', '/v1/responses'],
    ['GET', '/v1/no-such-route'],
    ['PUT', '/v1/models'],
    ['GET', '/v1'],
  ];
  const credentials: Array<[string, Record<string, string>]> = [
    ['no key', {}],
    ['a malformed Authorization', { authorization: 'Basic dXNlcjpwYXNz' }],
    ['an unknown key', { 'x-api-key': 'kmg_sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }],
  ];
  // Bodies that are not JSON, naming a model that does not exist.
  const broken = { headers: { 'content-type': 'application/json' }, body: '{"model": "no-such-model",' };
  for (const [what, headers] of credentials) {
    for (const [method, path] of routes) {
      const response = await call(method, path, method === 'POST' ? { headers: { ...headers, ...broken.headers }, body: broken.body } : { headers });
      t.is(response.status, 401, `${method} ${path} with ${what}`);
      t.regex(response.headers.get('x-request-id') ?? '', REQUEST_ID);
      t.deepEqual(await response.json(), INVALID_KEY_A);
    }
    const messages = await call('POST', '/v1/messages', { headers: { ...headers, ...broken.headers }, body: broken.body });
    t.deepEqual(await shapeB(messages), { status: 401, body: { type: 'error', error: { type: 'authentication_error', message: 'Invalid API key' }, request_id: undefined } }, what);
  }
});

test('decisions.md Files: created_at is the whole Unix second of the creation, and expires_at = created_at + seconds', async (t) => {
  const key = await app.keyFor(SCOPES, { account: 'clock' });
  const before = Math.floor(Date.now() / 1000);
  const file = await created(key, 86_400);
  const after = Math.floor(Date.now() / 1000);
  t.true(Number.isInteger(file.created_at), `created_at ${file.created_at} is whole seconds`);
  t.true(file.created_at >= before && file.created_at <= after, 'created_at is the time of the upload, in seconds');
  t.is(file.expires_at, file.created_at + 86_400);
  t.deepEqual(await (await call('GET', `/v1/files/${file.id}`, { key })).json(), file);
  const list = (await (await call('GET', '/v1/files', { key })).json()) as { data: unknown[] };
  t.deepEqual(list.data, [file]);
});

test('api.md section 5: a key with an allowlist lists, and calls on both endpoints, exactly the models on it', async (t) => {
  const key = await app.keyFor(SCOPES, { account: 'allowlist', models: ['echo-2'] });
  const models = (await (await call('GET', '/v1/models', { key })).json()) as { data: Array<{ id: string }> };
  t.deepEqual(
    models.data.map((model) => model.id),
    ['echo-2'],
  );
  t.is((await call('POST', '/v1/chat/completions', { key, ...chatBody({ model: 'echo-2' }) })).status, 200);
  t.is((await call('POST', '/v1/messages', { key, ...messagesBody({ model: 'echo-2' }) })).status, 200);
  t.is((await call('POST', '/v1/chat/completions', { key, ...chatBody({ model: 'echo-1' }) })).status, 403);
  t.is((await call('POST', '/v1/messages', { key, ...messagesBody({ model: 'echo-1' }) })).status, 404);
});
