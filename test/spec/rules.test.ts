import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import test, { type ExecutionContext } from 'ava';
import { SCOPES, type Scope } from '../../lib/auth/scopes.js';
import { newFileId } from '../../lib/files/file-id.js';
import type { FileRecord } from '../../lib/files/file-store.js';
import { DEFAULT_FILE_LIMITS } from '../../lib/files/file-limits.js';
import { MemoryCreationLimiter } from '../../lib/stores/memory/creation-limiter.js';
import { loadConfig } from '../../reference-server/config.js';
import { abortUploadMidway, filesApp, type FilesApp, type FilesAppOptions } from '../helpers/files-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { multipart, pdfOf, uploadForm, uploadParts, type Part } from '../helpers/multipart.js';
import { rawRequest } from '../helpers/raw-request.js';
import { SPEC_LIMITS } from '../helpers/spec-limits.js';
import { referenceApp } from '../helpers/reference-app.js';

// Rules of api.md and decisions.md about the whole service, on the reference server's own app
// (one for these tests). Each test uses an account of its own: the creation rate is per account.
// Then the rules of api.md sections 2, 3, 4 and 8 and decisions.md "Limits" and "Files" that no
// other test pins down, on the files API composed from lib/ (an app per test): the spec's own
// default numbers, a file without expiry, list positions, limits per account rather than per key,
// and what an aborted upload spends.

const server = await referenceApp();
test.after.always(() => server.close());

const REQUEST_ID = /^req_[A-Za-z0-9]{32}$/;
const NEVER = 'file-000000AAAAAAAAAAAAAAAAAAAAAAAAAA';

interface CallOptions {
  key?: string;
  headers?: Record<string, string>;
  body?: RequestInit['body'];
}

const call = (method: string, path: string, options: CallOptions = {}) =>
  fetch(`${server.url}${path}`, {
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
const messagesBody = (extra: Record<string, unknown> = {}) => json({ model: 'echo-1', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }], ...extra });

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
  await rm(server.config.filesDir, { recursive: true, force: true });
  try {
    const ready = await call('GET', '/readyz');
    t.is(ready.status, 503);
    t.deepEqual(await ready.json(), { status: 'unavailable', checks: { database: 'ok', blobs: 'unavailable' } });
    const health = await call('GET', '/healthz');
    t.is(health.status, 200, 'the process runs: healthz stays 200');
  } finally {
    await mkdir(server.config.filesDir, { recursive: true });
  }
  t.is((await call('GET', '/readyz')).status, 200, 'ready again once the blob store answers');
});

test('api.md section 5: each scope allows exactly its operations, on the reference server as composed', async (t) => {
  const account = 'scope-matrix';
  const owner = await server.keyFor(SCOPES, { account });
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
    {
      scope: 'embeddings:create',
      name: 'POST /v1/embeddings',
      send: (key) => call('POST', '/v1/embeddings', { key, ...json({ model: 'echo-embed-1', input: 'hi' }) }),
    },
  ];
  for (const scope of SCOPES) {
    const key = await server.keyFor([scope], { account });
    for (const operation of operations) {
      const response = await operation.send(key);
      const what = `${scope} on ${operation.name}`;
      if (operation.scope === scope) {
        t.is(response.status, 200, what);
        await response.arrayBuffer();
      } else if (operation.name === 'POST /v1/messages') {
        t.deepEqual(
          await shapeB(response),
          { status: 403, body: { type: 'error', error: { type: 'permission_error', message: 'Forbidden' }, request_id: undefined } },
          what,
        );
      } else {
        t.is(response.status, 403, what);
        t.deepEqual(await response.json(), FORBIDDEN_A, what);
      }
    }
  }
});

test('decisions.md Request ids: every Shape A response, success or error, carries its own X-Request-Id', async (t) => {
  const account = 'request-ids';
  const key = await server.keyFor(SCOPES, { account });
  const readOnly = await server.keyFor(['files:read'], { account });
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
  const tooLarge = await rawRequest(`${server.url}/v1/files`, {
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
  const key = await server.keyFor(SCOPES, { account });
  const noMessages = await server.keyFor(['files:read'], { account });
  const allowlisted = await server.keyFor(SCOPES, { account, models: ['echo-1'] });
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
  const document = (fileId: string) =>
    messagesBody({ messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: fileId } }] }] });
  const cases: Array<[Response, ReturnType<typeof errorCase>]> = [
    [
      await send({ key, headers: { 'content-type': 'application/json' }, body: '{"model":' }),
      errorCase(400, 'invalid_request_error', 'Request body must be valid JSON'),
    ],
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
  const key = await server.keyFor(SCOPES, { account: 'client-ids' });
  const theirs = 'req_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
  const spoof = { 'x-request-id': theirs, 'request-id': theirs };
  const shapeAResponses = [await call('GET', '/v1/files', { key, headers: spoof }), await call('GET', '/v1/models', { headers: spoof })];
  for (const response of shapeAResponses) {
    const ours = response.headers.get('x-request-id') ?? '';
    t.regex(ours, REQUEST_ID);
    t.not(ours, theirs);
    await response.arrayBuffer();
    const line = await server.logLine((entry) => entry.msg === 'request' && entry.requestId === ours);
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
    const line = await server.logLine((entry) => entry.msg === 'request' && entry.requestId === ours);
    t.is(line.status, status);
  }
  t.false(
    server.logs.some((entry) => entry.requestId === theirs),
    'no log line carries the client-sent id',
  );
});

test('no secret in any log: a key or an admin token a client puts in the path is logged as [secret]', async (t) => {
  const key = await server.keyFor(SCOPES, { account: 'secret-paths' });
  const token = `${server.config.gateway.keyPrefix}_admin_${randomBytes(32).toString('base64url')}`;
  for (const path of [`/v1/files/${key}`, `/v1/${key}/content`, `/admin/v1/keys/${token}`]) {
    const response = await call('GET', path, { key });
    await response.arrayBuffer();
    const ours = response.headers.get('x-request-id') ?? '';
    const line = await server.logLine((entry) => entry.msg === 'request' && entry.requestId === ours);
    t.is(line.path, path.replace(key, '[secret]').replace(token, '[secret]'));
  }
  t.false(JSON.stringify(server.logs).includes(key.slice(-20)), 'the key is in no log line');
  t.false(JSON.stringify(server.logs).includes(token.slice(-20)), 'nor the token');
});

test('decisions.md Errors: without an accepted key every /v1 route, known or not, answers 401, whatever else the request breaks', async (t) => {
  const noKey = await rawRequest(`${server.url}/v1/files`, {
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
    t.deepEqual(
      await shapeB(messages),
      { status: 401, body: { type: 'error', error: { type: 'authentication_error', message: 'Invalid API key' }, request_id: undefined } },
      what,
    );
  }
});

test('decisions.md Files: created_at is the whole Unix second of the creation, and expires_at = created_at + seconds', async (t) => {
  const key = await server.keyFor(SCOPES, { account: 'clock' });
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
  const key = await server.keyFor(SCOPES, { account: 'allowlist', models: ['echo-2'] });
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

// The files API composed from lib/.
async function files(t: ExecutionContext, options: FilesAppOptions = {}): Promise<FilesApp> {
  const app = await filesApp(options);
  t.teardown(() => app.close());
  return app;
}

async function uploadTo(
  app: FilesApp,
  key: string,
  pdf: Buffer,
  extra: Part[] = [],
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const { body, contentType } = multipart(uploadParts(pdf, 'report.pdf', extra));
  const res = await fetch(`${app.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': contentType }, body });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

const get = async (app: FilesApp, key: string, path: string) => {
  const res = await fetch(`${app.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

const ROOMY = { maxFiles: Number.MAX_SAFE_INTEGER, maxBytes: Number.MAX_SAFE_INTEGER };

/** Puts `count` files of `account` in the store directly, as earlier uploads would have. */
async function seed(app: FilesApp, account: string, count: number, bytes = 1): Promise<FileRecord[]> {
  const records: FileRecord[] = [];
  for (let i = 0; i < count; i++) {
    const createdAt = app.clock.seconds - count + i;
    const record: FileRecord = { id: newFileId(createdAt), account, filename: 'old.pdf', bytes, createdAt, expiresAt: null };
    if (!(await app.files.create(record, ROOMY, app.clock.seconds))) throw new Error('seed refused');
    records.push(record);
  }
  return records;
}

const STORAGE_QUOTA = { error: { message: 'Storage quota exceeded', type: 'rate_limit_error', param: null, code: 'storage_quota_exceeded' } };

test('api.md section 8: the spec numbers are the defaults of lib and of the reference server', (t) => {
  const { maxFileBytes, maxFiles, maxStoredBytes } = SPEC_LIMITS;
  t.deepEqual({ ...DEFAULT_FILE_LIMITS }, { maxFileBytes, maxFiles, maxStoredBytes });
  t.deepEqual(loadConfig({}).gateway.limits, SPEC_LIMITS);
});

test('api.md section 8: by default an account keeps 1,000 files; the 1,001st is 429 storage_quota_exceeded', async (t) => {
  const app = await files(t);
  await seed(app, 'acct-a', 999);
  t.is((await uploadTo(app, app.keys.a, pdfOf(100))).status, 200, 'the 1,000th');
  const refused = await uploadTo(app, app.keys.a, pdfOf(100));
  t.is(refused.status, 429, 'the 1,001st');
  t.deepEqual(refused.body, STORAGE_QUOTA);
  t.is(refused.headers.get('x-should-retry'), 'false');
});

test('api.md section 8: by default an account keeps 100,000,000 bytes, exactly', async (t) => {
  const app = await files(t);
  await seed(app, 'acct-a', 1, 100_000_000 - 1000);
  t.is((await uploadTo(app, app.keys.a, pdfOf(1000))).status, 200, 'exactly the remaining bytes fit');
  const refused = await uploadTo(app, app.keys.a, pdfOf(10));
  t.is(refused.status, 429);
  t.deepEqual(refused.body, STORAGE_QUOTA);
});

test('api.md section 4: without a limit a page holds 10,000 files, and has_more says the rest is there', async (t) => {
  const app = await files(t);
  const seeded = await seed(app, 'acct-a', 10_001);
  const ids = seeded.map((file) => file.id).sort();
  const desc = await get(app, app.keys.a, '/v1/files');
  t.is(desc.status, 200);
  const data = desc.body.data as Array<{ id: string }>;
  t.is(data.length, 10_000);
  t.true(desc.body.has_more);
  t.is(desc.body.first_id, ids.at(-1));
  t.is(desc.body.last_id, ids[1]);
  const rest = await get(app, app.keys.a, `/v1/files?after=${ids[1]}`);
  t.deepEqual(rest.body, {
    object: 'list',
    data: [{ id: ids[0], object: 'file', bytes: 1, created_at: seeded[0]?.createdAt, filename: 'old.pdf', purpose: 'user_data', status: 'processed' }],
    first_id: ids[0],
    last_id: ids[0],
    has_more: false,
  });
});

test('api.md section 3: a file uploaded without an expiry stays until it is deleted, and counts all along', async (t) => {
  const app = await files(t);
  const { body: file } = await uploadTo(app, app.keys.a, pdfOf(500));
  t.false('expires_at' in file);
  app.clock.seconds += 10 * 365 * 86_400;
  t.deepEqual((await get(app, app.keys.a, `/v1/files/${file.id}`)).body, file, 'ten years on');
  t.deepEqual((await get(app, app.keys.a, '/v1/files')).body.data as unknown[], [file]);
  t.deepEqual(await app.files.usage('acct-a', app.clock.seconds), { files: 1, bytes: 500 });
  t.is((await fetch(`${app.url}/v1/files/${file.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${app.keys.a}` } })).status, 200);
  t.is((await get(app, app.keys.a, `/v1/files/${file.id}`)).status, 404);
});

test('decisions.md Files: after keeps working when that file has expired, and a foreign id is only a position', async (t) => {
  const app = await files(t);
  const expiring = [
    { name: 'expires_after[anchor]', value: 'created_at' },
    { name: 'expires_after[seconds]', value: '3600' },
  ];
  const first = (await uploadTo(app, app.keys.a, pdfOf(100))).body.id as string;
  app.clock.seconds += 1;
  const middle = (await uploadTo(app, app.keys.a, pdfOf(100), expiring)).body.id as string;
  app.clock.seconds += 1;
  const foreign = (await uploadTo(app, app.keys.b, pdfOf(100))).body.id as string;
  app.clock.seconds += 1;
  const last = (await uploadTo(app, app.keys.a, pdfOf(100))).body.id as string;
  app.clock.seconds += 3600;
  t.is((await get(app, app.keys.a, `/v1/files/${middle}`)).status, 404, 'the middle file has expired');

  const page = async (query: string) => ((await get(app, app.keys.a, `/v1/files?${query}`)).body.data as Array<{ id: string }>).map((file) => file.id);
  t.deepEqual(await page(`order=asc&after=${middle}`), [last]);
  t.deepEqual(await page(`order=desc&after=${middle}`), [first]);
  // The other account's file sits between first and last: as a position it says nothing more.
  const foreignPage = await get(app, app.keys.a, `/v1/files?order=asc&after=${foreign}`);
  t.is(foreignPage.status, 200);
  t.deepEqual(
    (foreignPage.body.data as Array<{ id: string }>).map((file) => file.id),
    [last],
  );
  t.deepEqual(await page(`order=desc&after=${foreign}`), [first]);
});

test("decisions.md Keys: files and quotas belong to the account: every key of it shares them, another account's do not", async (t) => {
  const NOON = Date.UTC(2030, 0, 15, 12, 0, 0);
  const limiter = new MemoryCreationLimiter({ createsPerMinute: 2, nowMs: () => NOON });
  const app = await files(t, { creationLimiter: limiter, limits: { maxFiles: 1 } });
  const { body: file } = await uploadTo(app, app.keys.a, pdfOf(100));
  t.deepEqual((await uploadTo(app, app.keys.a2, pdfOf(100))).body, STORAGE_QUOTA, "the stock is the account's");
  t.deepEqual((await get(app, app.keys.a2, '/v1/files')).body.data as unknown[], [file]);
  t.is((await fetch(`${app.url}/v1/files/${file.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${app.keys.a2}` } })).status, 200);
  t.is((await uploadTo(app, app.keys.a2, pdfOf(100))).status, 200, 'the second creation of the minute');
  t.like((await uploadTo(app, app.keys.a, pdfOf(100))).body, { error: { code: 'rate_limit_exceeded' } }, "the rate is the account's");
  t.is((await uploadTo(app, app.keys.b, pdfOf(100))).status, 200, 'another account has its own');
});

test('decisions.md Limits: the bytes created per day are the PDF bytes, not the multipart envelope', async (t) => {
  const limiter = new MemoryCreationLimiter({ bytesPerDay: 3000, nowMs: () => Date.UTC(2030, 0, 15, 23, 0, 0) });
  const app = await files(t, { creationLimiter: limiter });
  for (let i = 0; i < 3; i++) t.is((await uploadTo(app, app.keys.a, pdfOf(1000))).status, 200, `upload ${i + 1} of 1,000 bytes`);
  const refused = await uploadTo(app, app.keys.a, pdfOf(10));
  t.is(refused.status, 429);
  t.deepEqual(refused.body, { error: { message: 'Ingestion quota exceeded', type: 'rate_limit_error', param: null, code: 'ingestion_quota_exceeded' } });
  t.is(refused.headers.get('retry-after'), '3600', 'seconds to the next UTC midnight');
  t.like(await limiter.usage('acct-a'), { bytesToday: 3000, createsToday: 3 });
});

test('decisions.md Limits: an upload the client aborts spends nothing from any limit', async (t) => {
  const limiter = new MemoryCreationLimiter({ nowMs: () => Date.UTC(2030, 0, 15, 12, 0, 0) });
  const app = await files(t, { creationLimiter: limiter });
  await abortUploadMidway(app, pdfOf(1_000_000));
  t.deepEqual(await limiter.usage('acct-a'), { createsThisMinute: 0, createsToday: 0, bytesToday: 0 });
  t.deepEqual(await app.files.usage('acct-a', app.clock.seconds), { files: 0, bytes: 0 });
  t.is((await uploadTo(app, app.keys.a, pdfOf(100))).status, 200);
});

test('decisions.md Files: files uploaded one after another within one second are listed in that order', async (t) => {
  const app = await files(t);
  const second = app.clock.seconds;
  const uploaded: unknown[] = [];
  for (const [i, tenths] of [0, 1, 1, 1, 5, 9].entries()) {
    app.clock.seconds = second + tenths / 10; // three in one millisecond, all in one second
    const { status, body } = await uploadTo(app, app.keys.a, pdfOf(100 + i));
    t.is(status, 200);
    t.is(body.created_at, second);
    uploaded.push(body.id);
  }
  const asc = await get(app, app.keys.a, '/v1/files?order=asc');
  t.deepEqual(
    (asc.body.data as Array<{ id: string }>).map((file) => file.id),
    uploaded,
  );
  const desc = await get(app, app.keys.a, '/v1/files');
  t.deepEqual(
    (desc.body.data as Array<{ id: string }>).map((file) => file.id),
    uploaded.toReversed(),
  );
});
