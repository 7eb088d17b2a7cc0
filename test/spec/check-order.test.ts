import test, { type ExecutionContext } from 'ava';
import { spendBudgets } from '../../lib/cost/budgets.js';
import { MemorySpendLedger } from '../../lib/stores/memory/spend-ledger.js';
import { picoOfUsd } from '../../lib/picodollars.js';
import { MemoryCreationLimiter } from '../../lib/stores/memory/creation-limiter.js';
import { filesApp, type FilesApp, type FilesAppOptions } from '../helpers/files-app.js';
import type { Provider } from '../../lib/models/provider.js';
import { echoProvider } from '../../lib/models/providers/echo/index.js';
import { modelsApp, type ModelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { multipart, pdfOf, uploadParts, type Part } from '../helpers/multipart.js';
import { rawRequest, type RawResponse } from '../helpers/raw-request.js';
import { referenceApp, type ReferenceApp } from '../helpers/reference-app.js';

// decisions.md: "Every request under /v1 is authenticated first ... Then: scope (403), then request
// validation (400/413), then existence (404), then quotas (429)." Each request here breaks several
// rules at once; the answer must be the earliest. (On the files API no operation can be both 404
// and 429: only an upload meets a quota, and an upload names no existing resource. A model call can:
// an unknown model or attached file with the budget spent.)
//
// And the reference server decides by exact path whether a request is under /v1 (authenticated first)
// and whether it is under /v1/messages (Shape B), so its routers must match exactly too: a router
// that took /V1/files or /v1/Messages as its route let such requests skip authentication (a 500)
// or reach Messages in Shape A.

// The models endpoints, composed as a gateway would (modelsApp), with a small body limit; and the
// reference server's own app, for its routes.
let gateway: ModelsApp;
let referenceServer: ReferenceApp;
test.before(async () => {
  gateway = await modelsApp({ bodyLimit: 4096 });
  referenceServer = await referenceApp();
});
test.after.always(() => Promise.all([gateway?.close(), referenceServer?.close()]));

const FILE_LIMIT = 10_000;
// A fixed clock: the minute never rolls over in the middle of a test.
const NOON = Date.UTC(2030, 0, 15, 12, 0, 0);

async function files(t: ExecutionContext, options: FilesAppOptions = {}): Promise<FilesApp> {
  const app = await filesApp({ ...options, limits: { maxFileBytes: FILE_LIMIT, ...options.limits } });
  t.teardown(() => app.close());
  return app;
}

function upload(app: FilesApp, key: string | undefined, parts: Part[], headers: Record<string, string> = {}): Promise<RawResponse> {
  const { body, contentType } = multipart(parts);
  return rawRequest(`${app.url}/v1/files`, {
    headers: { ...(key === undefined ? {} : { authorization: `Bearer ${key}` }), 'content-type': contentType, ...headers },
    body,
  });
}

const code = (res: RawResponse) => (JSON.parse(res.body.toString('utf8')) as { error: { code: string } }).error.code;
const answer = (res: RawResponse) => `${res.status} ${code(res)}`;

/** The uploads that break one rule each, beside whatever the test already breaks. */
const broken = {
  tooLarge: uploadParts(pdfOf(FILE_LIMIT + 1)),
  notPdf: uploadParts(Buffer.from('GIF89a')),
  badPurpose: [
    { name: 'purpose', value: 'assistants' },
    { name: 'file', value: pdfOf(100), filename: 'a.pdf', contentType: 'application/pdf' },
  ],
  badName: uploadParts(pdfOf(100), 'a.txt'),
  badExpiry: uploadParts(pdfOf(100), 'a.pdf', [{ name: 'expires_after[anchor]', value: 'created_at' }]),
};

test('upload: with the creation rate spent, a key without files:write gets 403 and invalid uploads their 400/413/415, not 429', async (t) => {
  const limiter = new MemoryCreationLimiter({ createsPerMinute: 1, nowMs: () => NOON });
  const app = await files(t, { creationLimiter: limiter });
  t.is((await upload(app, app.keys.a, uploadParts(pdfOf(100)))).status, 200);
  t.is(answer(await upload(app, app.keys.a, uploadParts(pdfOf(100)))), '429 rate_limit_exceeded', 'the rate is spent');

  t.is(answer(await upload(app, app.keys.readOnly, uploadParts(pdfOf(100)))), '403 forbidden');
  t.is(answer(await upload(app, app.keys.readOnly, broken.tooLarge)), '403 forbidden');
  t.is(answer(await upload(app, app.keys.a, broken.tooLarge)), '413 file_too_large');
  t.is(answer(await upload(app, app.keys.a, broken.notPdf)), '400 invalid_file_format');
  t.is(answer(await upload(app, app.keys.a, broken.badPurpose)), '400 invalid_purpose');
  t.is(answer(await upload(app, app.keys.a, broken.badName)), '400 invalid_file_name');
  t.is(answer(await upload(app, app.keys.a, broken.badExpiry)), '400 invalid_expires_after');
  t.is(answer(await upload(app, app.keys.a, uploadParts(pdfOf(100)), { 'content-encoding': 'gzip' })), '415 unsupported_content_encoding');
  t.like(await limiter.usage('acct-a'), { createsThisMinute: 1, bytesToday: 100 }, 'none of them spent anything');
});

test('upload: with the kept limits reached, 401, 403 and 400/413 come before 429 storage_quota_exceeded', async (t) => {
  const app = await files(t, { limits: { maxFiles: 1 } });
  t.is((await upload(app, app.keys.a, uploadParts(pdfOf(100)))).status, 200);
  t.is(answer(await upload(app, app.keys.a2, uploadParts(pdfOf(100)))), '429 storage_quota_exceeded', 'the stock is full');

  t.is(answer(await upload(app, undefined, broken.tooLarge)), '401 invalid_api_key');
  t.is(answer(await upload(app, app.keys.noFiles, broken.notPdf)), '403 forbidden');
  t.is(answer(await upload(app, app.keys.a, broken.tooLarge)), '413 file_too_large');
  t.is(answer(await upload(app, app.keys.a, broken.notPdf)), '400 invalid_file_format');
  t.is(answer(await upload(app, app.keys.a, broken.badExpiry)), '400 invalid_expires_after');
});

test('files: 401 before 403 before 400 before 404 on the file endpoints', async (t) => {
  const app = await files(t);
  const send = async (key: string | undefined, method: string, path: string) =>
    answer(await rawRequest(`${app.url}${path}`, { method, headers: key === undefined ? {} : { authorization: `Bearer ${key}` } }));
  const missing = 'file-000000AAAAAAAAAAAAAAAAAAAAAAAAAA';
  t.is(await send(undefined, 'DELETE', '/v1/files/not-an-id'), '401 invalid_api_key');
  for (const key of [app.keys.writeOnly, app.keys.noFiles]) {
    for (const path of [
      '/v1/files?order=sideways&after=nope',
      '/v1/files?limit=0',
      '/v1/files/not-an-id',
      `/v1/files/${missing}`,
      `/v1/files/${missing}/content`,
    ]) {
      t.is(await send(key, 'GET', path), '403 forbidden', `GET ${path} without files:read`);
    }
  }
  for (const key of [app.keys.readOnly, app.keys.writeOnly, app.keys.noFiles]) {
    t.is(await send(key, 'DELETE', '/v1/files/not-an-id'), '403 forbidden');
    t.is(await send(key, 'DELETE', `/v1/files/${missing}`), '403 forbidden');
  }
  t.is(await send(app.keys.a, 'DELETE', '/v1/files/not-an-id'), '400 invalid_file_id');
  t.is(await send(app.keys.a, 'DELETE', `/v1/files/${missing}`), '404 file_not_found');
  t.is(await send(app.keys.a, 'GET', '/v1/files/not-an-id/content'), '400 invalid_file_id');
  t.is(await send(app.keys.a, 'GET', `/v1/files/${missing}/content`), '404 file_not_found');
  t.is(await send(app.keys.a, 'GET', '/v1/files?order=sideways&after=nope'), '400 invalid_order');
});

const chat = (key: string | undefined, body: string) =>
  fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) },
    body,
  });
const messages = (key: string | undefined, body: string) =>
  fetch(`${gateway.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'x-api-key': key }) },
    body,
  });
const shapeA = async (response: Response) => {
  const { error } = (await response.json()) as { error: { code: string; message: string } };
  return `${response.status} ${error.code}: ${error.message}`;
};
const shapeB = async (response: Response) => {
  const body = (await response.json()) as { error: { type: string; message: string }; request_id: string };
  if (body.request_id !== response.headers.get('request-id')) throw new Error('request-id header differs from request_id');
  return `${response.status} ${body.error.type}: ${body.error.message}`;
};

const userText = [{ role: 'user', content: 'hi' }];
const tooLarge = JSON.stringify({ model: 'no-such-model', messages: [{ role: 'user', content: 'x'.repeat(5000) }] });
const chatFile = (model: string, fileId: string) =>
  JSON.stringify({ model, messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: fileId } }] }] });
const messagesFile = (model: string, fileId: string) =>
  JSON.stringify({ model, max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: fileId } }] }] });
const UNKNOWN_FILE = 'file-000000AAAAAAAAAAAAAAAAAAAAAAAAAA';

test('chat completions: 401, then the scope, then validation, then existence', async (t) => {
  const noChat = await gateway.keyFor(['models:read', 'files:read']);
  const key = await gateway.keyFor();
  t.is(await shapeA(await chat(undefined, '{"model":')), '401 invalid_api_key: Invalid API key');
  t.is(await shapeA(await chat(noChat, '{"model":')), '403 forbidden: Forbidden', 'scope before invalid JSON');
  t.is(await shapeA(await chat(noChat, tooLarge)), '403 forbidden: Forbidden', 'scope before a body over the limit');
  t.is(await shapeA(await chat(noChat, chatFile('no-such-model', UNKNOWN_FILE))), '403 forbidden: Forbidden', 'scope before existence');
  t.is(await shapeA(await chat(key, tooLarge)), '413 request_too_large: Request body is too large', 'a body over the limit before an unknown model');
  t.is(
    await shapeA(await chat(key, chatFile('no-such-model', 'file-nope'))),
    '400 invalid_file_id: Invalid file ID',
    'a malformed file id before an unknown model',
  );
});

test('chat completions: a model outside the allowlist is 403 before the rest of the request is judged', async (t) => {
  const key = await gateway.keyFor(undefined, { models: ['gpt-test'] });
  const notAllowed = (model: string) => `403 forbidden: Model '${model}' is not allowed for this API key`;
  t.is(await shapeA(await chat(key, chatFile('echo-1', 'file-nope'))), notAllowed('echo-1'), 'before a malformed file id');
  t.is(await shapeA(await chat(key, chatFile('no-such-model', UNKNOWN_FILE))), notAllowed('no-such-model'), 'before a missing file');
  const stored = await gateway.storePdf(makePdf(1), { account: 'someone-else' });
  t.is(await shapeA(await chat(key, chatFile('echo-1', stored))), notAllowed('echo-1'), "before another account's file");
});

test('attachments: a key without files:read gets 403 before the file id is judged or looked up', async (t) => {
  const key = await gateway.keyFor(['chat:completions', 'messages:create']);
  for (const fileId of ['file-nope', UNKNOWN_FILE]) {
    t.is(await shapeA(await chat(key, chatFile('echo-1', fileId))), '403 forbidden: Forbidden', fileId);
    t.is(await shapeA(await chat(key, chatFile('no-such-model', fileId))), '403 forbidden: Forbidden', `${fileId}, unknown model`);
    t.is(await shapeB(await messages(key, messagesFile('echo-1', fileId))), '403 permission_error: Forbidden', fileId);
    t.is(await shapeB(await messages(key, messagesFile('no-such-model', fileId))), '403 permission_error: Forbidden', `${fileId}, unknown model`);
  }
});

test('messages: 401, then the scope, then validation, then existence, all in Shape B', async (t) => {
  const noMessages = await gateway.keyFor(['chat:completions', 'files:read']);
  const key = await gateway.keyFor();
  const allowlisted = await gateway.keyFor(undefined, { models: ['claude-test'] });
  t.is(await shapeB(await messages(undefined, '{')), '401 authentication_error: Invalid API key');
  t.is(await shapeB(await messages(noMessages, '{')), '403 permission_error: Forbidden');
  t.is(await shapeB(await messages(noMessages, tooLarge)), '403 permission_error: Forbidden');
  t.is(await shapeB(await messages(noMessages, JSON.stringify({ model: 'no-such-model', messages: userText }))), '403 permission_error: Forbidden');
  t.is(await shapeB(await messages(key, tooLarge)), '413 request_too_large: Request body is too large');
  t.is(await shapeB(await messages(allowlisted, messagesFile('echo-1', 'file-nope'))), '400 invalid_request_error: Invalid file ID');
});

test('messages: with a missing or foreign file attached, a disallowed and an unknown model still answer alike', async (t) => {
  const allowlisted = await gateway.keyFor(undefined, { models: ['claude-test'] });
  const unrestricted = await gateway.keyFor();
  const foreign = await gateway.storePdf(makePdf(1), { account: 'someone-else' });
  for (const fileId of [UNKNOWN_FILE, foreign]) {
    const disallowed = await shapeB(await messages(allowlisted, messagesFile('echo-1', fileId)));
    const unknown = await shapeB(await messages(unrestricted, messagesFile('no-such-model', fileId)));
    t.is(disallowed, unknown, fileId);
    t.regex(disallowed, /^404 not_found_error: /);
  }
});

test('model calls: a body without what its format requires is 400 before existence and limits, and is neither sent nor counted', async (t) => {
  const echo = echoProvider({ id: 'local' });
  const sent: string[] = [];
  const provider: Provider = {
    id: 'local',
    chatCompletions: (request) => (sent.push('chat'), echo.chatCompletions!(request)),
    messages: (request) => (sent.push('messages'), echo.messages!(request)),
    responses: (request) => (sent.push('responses'), echo.responses!(request)),
  };
  // The fixed clock: the minute of the one request never rolls over between its two calls.
  const app = await modelsApp({
    catalog: [{ id: 'echo-1', provider: 'local', upstreamModel: 'echo-upstream-1', created: 1 }],
    providers: [provider],
    nowMs: () => NOON,
  });
  t.teardown(() => app.close());
  const key = await app.keyFor(undefined, { limits: { requestsPerMinute: 1 } });
  const malformed: Array<[string, Record<string, unknown>, string]> = [
    ['/v1/chat/completions', { model: 'echo-1' }, "'messages' must be a non-empty array"],
    ['/v1/chat/completions', { model: 'no-such-model', messages: [] }, "'messages' must be a non-empty array"],
    ['/v1/chat/completions', { model: 'echo-1', messages: ['hi'] }, "'messages[0].role' must be a string"],
    ['/v1/messages', { model: 'echo-1', messages: userText }, "'max_tokens' must be a positive integer"],
    ['/v1/messages', { model: 'no-such-model', max_tokens: 0, messages: userText }, "'max_tokens' must be a positive integer"],
    ['/v1/messages/count_tokens', { model: 'echo-1', messages: 'hi' }, "'messages' must be a non-empty array"],
    ['/v1/responses', { model: 'echo-1', input: 5 }, "'input' must be a string or an array"],
    ['/v1/responses', { model: 'no-such-model' }, "'input' must be a string or an array"],
    // A stream asked for by anything but a boolean would be answered whole.
    ['/v1/chat/completions', { model: 'echo-1', messages: userText, stream: 'yes' }, "'stream' must be a boolean"],
    ['/v1/messages', { model: 'echo-1', max_tokens: 5, messages: userText, stream: 1 }, "'stream' must be a boolean"],
    ['/v1/responses', { model: 'no-such-model', input: 'hi', stream: 'true' }, "'stream' must be a boolean"],
  ];
  const refusals = async () => {
    for (const [path, body, message] of malformed) {
      const response = await app.post(path, body, { 'x-api-key': key });
      const answer = (await response.json()) as { error: { message: string } };
      t.deepEqual([response.status, answer.error.message], [400, message], `${path} ${JSON.stringify(body)}`);
    }
  };
  await refusals();
  const chatCall = () => app.post('/v1/chat/completions', { model: 'echo-1', messages: userText }, { 'x-api-key': key });
  t.is((await chatCall()).status, 200, 'the refusals counted no request');
  await refusals();
  t.is((await chatCall()).status, 429, 'the one request a minute is spent');
  t.deepEqual(sent, ['chat'], 'no malformed body reached the provider');
  // A count needs no max_tokens.
  t.is((await app.post('/v1/messages/count_tokens', { model: 'echo-1', messages: userText }, { 'x-api-key': await app.keyFor() })).status, 200);
});

test('model calls: with the budget spent, an invalid body, an unknown model or file and an untranslatable parameter get their 400 and 404 before the 429', async (t) => {
  const ledger = new MemorySpendLedger({ nowMs: () => NOON });
  const app = await modelsApp({ nowMs: () => NOON, budgets: spendBudgets({ ledger, accounts: { get: async () => ({ costPerDay: 1 }) } }) });
  t.teardown(() => app.close());
  await ledger.add(['account:spender'], Number(picoOfUsd(1)));
  const key = await app.keyFor(undefined, { account: 'spender' });
  const chatCall = (body: Record<string, unknown>) => app.post('/v1/chat/completions', body, { authorization: `Bearer ${key}` });
  const messagesCall = (body: Record<string, unknown>) =>
    app.post('/v1/messages', { max_tokens: 5, ...body }, { 'x-api-key': key, 'anthropic-version': '2023-06-01' });
  const fileBlock = { type: 'document', source: { type: 'file', file_id: UNKNOWN_FILE } };
  t.is(await shapeA(await chatCall({ model: 'echo-1', messages: [] })), "400 invalid_request: 'messages' must be a non-empty array");
  t.is(await shapeA(await chatCall({ model: 'no-such-model', messages: userText })), "404 model_not_found: The model 'no-such-model' does not exist");
  t.is(
    await shapeA(await chatCall({ model: 'echo-1', messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: UNKNOWN_FILE } }] }] })),
    '404 file_not_found: File not found',
  );
  t.is(await shapeB(await messagesCall({ model: 'echo-1', messages: [] })), "400 invalid_request_error: 'messages' must be a non-empty array");
  t.is(await shapeB(await messagesCall({ model: 'no-such-model', messages: userText })), '404 not_found_error: Model not found');
  t.is(await shapeB(await messagesCall({ model: 'echo-1', messages: [{ role: 'user', content: [fileBlock] }] })), '404 not_found_error: File not found');
  // An OpenAI model has no top_k: refused before anything is sent to it (nothing listens there).
  t.regex(
    await shapeB(await messagesCall({ model: 'gpt-test', messages: userText, top_k: 5 })),
    /^400 invalid_request_error: 'top_k' cannot be sent to this model/,
  );

  t.is(
    await shapeA(await chatCall({ model: 'echo-1', messages: userText })),
    "429 budget_exceeded: Budget exceeded: the account's daily budget of 1 USD is spent; it resets at 2030-01-16T00:00:00Z",
  );
  t.is(
    await shapeB(await messagesCall({ model: 'echo-1', messages: userText })),
    "429 rate_limit_error: Budget exceeded: the account's daily budget of 1 USD is spent; it resets at 2030-01-16T00:00:00Z",
  );
});

// The routes of the reference server match their paths exactly.
const unknownUrl = (method: string, path: string) => ({
  error: { message: `Unknown request URL: ${method} ${path}`, type: 'invalid_request_error', param: null, code: 'unknown_url' },
});

for (const [method, path] of [
  ['GET', '/V1/models'],
  ['GET', '/V1/files'],
  ['POST', '/V1/chat/completions'],
  ['POST', '/V1/messages'],
  ['GET', '/HEALTHZ'],
] as const) {
  test(`${method} ${path} is an unknown URL, never a route that skipped authentication`, async (t) => {
    const response = await fetch(`${referenceServer.url}${path}`, { method });
    t.deepEqual({ status: response.status, body: await response.json() }, { status: 404, body: unknownUrl(method, path) });
  });
}

test('under /v1 the key comes first; a path that differs by case is no route', async (t) => {
  const response = await fetch(`${referenceServer.url}/v1/Messages`, { method: 'POST', headers: { 'x-api-key': await referenceServer.keyFor() }, body: '{}' });
  t.deepEqual({ status: response.status, body: await response.json() }, { status: 404, body: unknownUrl('POST', '/v1/Messages') });
  t.false(
    referenceServer.logs.some((line) => line.level >= 50),
    'no error-level log line',
  );
});

test('GET /v1/messages is a 405 in Shape B with request-id: every /v1/messages response carries one', async (t) => {
  const response = await fetch(`${referenceServer.url}/v1/messages`, { headers: { 'x-api-key': await referenceServer.keyFor() } });
  const body = (await response.json()) as { type?: string; error?: { type?: string }; request_id?: string };
  t.is(response.status, 405);
  t.is(body.type, 'error');
  t.is(body.error?.type, 'invalid_request_error');
  t.regex(body.request_id ?? '', /^req_[A-Za-z0-9]{32}$/);
  t.is(response.headers.get('request-id'), body.request_id ?? null);
  t.regex(response.headers.get('allow') ?? '', /POST/);
});
