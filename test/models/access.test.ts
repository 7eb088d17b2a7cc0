import test from 'ava';
import type { FileStore } from '../../lib/files/file-store.js';
import { newFileId } from '../../lib/files/file-id.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { modelsApp, type ModelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { rawExchange } from '../helpers/raw-request.js';

// Everything here is refused before any upstream is called, or answered by the echo provider.
let gateway: ModelsApp;

/** A file store that counts its lookups by id. */
function countingStore(): { files: FileStore; lookups: () => number } {
  const inner = new MemoryFileStore();
  let lookups = 0;
  const files: FileStore = Object.assign(Object.create(inner) as FileStore, {
    get: (...args: Parameters<FileStore['get']>) => {
      lookups += 1;
      return inner.get(...args);
    },
  });
  return { files, lookups: () => lookups };
}

const { files, lookups } = countingStore();
let countedGateway: ModelsApp;
test.before(async () => {
  gateway = await modelsApp({ bodyLimit: 4096, maxAttachedBytes: 5000 });
  countedGateway = await modelsApp({ files, blobs: new MemoryBlobStore() });
});
test.after.always(() => Promise.all([gateway?.close(), countedGateway?.close()]));

const chat = (key: string, body: unknown) => gateway.post('/v1/chat/completions', body, { authorization: `Bearer ${key}` });
const messages = (key: string, body: unknown) => gateway.post('/v1/messages', body, { 'x-api-key': key });
const userText = [{ role: 'user', content: 'hi' }];
const chatFile = (fileId: unknown) => [
  {
    role: 'user',
    content: [
      { type: 'text', text: 'read' },
      { type: 'file', file: { file_id: fileId } },
    ],
  },
];
const messagesFile = (fileId: unknown) => [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: fileId } }] }];
const shapeA = (status: number, type: string, code: string, message: string) => ({ status, body: { error: { message, type, param: null, code } } });
const answer = async (response: Response) => ({ status: response.status, body: (await response.json()) as unknown });
/** A Shape B answer without its request id, which differs on every response. */
const shapeB = async (response: Response) => {
  const body = (await response.json()) as { request_id?: string; error?: unknown };
  const requestId = response.headers.get('request-id');
  return { status: response.status, sameId: body.request_id === requestId, body: { ...body, request_id: undefined } };
};
const notFoundB = { status: 404, sameId: true, body: { type: 'error', error: { type: 'not_found_error', message: 'Model not found' }, request_id: undefined } };

test('chat completions: a model outside the allowlist is 403 with the exact message, whether or not it exists', async (t) => {
  const key = await gateway.keyFor(undefined, { models: ['gpt-test'] });
  for (const model of ['echo-1', 'no-such-model']) {
    t.deepEqual(
      await answer(await chat(key, { model, messages: userText })),
      shapeA(403, 'permission_error', 'forbidden', `Model '${model}' is not allowed for this API key`),
    );
  }
});

test('chat completions: a key without allowlist asking for an unknown model gets 404 model_not_found', async (t) => {
  const key = await gateway.keyFor();
  t.deepEqual(
    await answer(await chat(key, { model: 'no-such-model', messages: userText })),
    shapeA(404, 'invalid_request_error', 'model_not_found', "The model 'no-such-model' does not exist"),
  );
});

test('chat completions: a model on the allowlist is answered', async (t) => {
  const key = await gateway.keyFor(undefined, { models: ['echo-1'] });
  t.is((await chat(key, { model: 'echo-1', messages: userText })).status, 200);
});

test('messages: an unknown and a disallowed model get the same 404, header for header', async (t) => {
  const key = await gateway.keyFor(undefined, { models: ['claude-test'] });
  const unrestricted = await gateway.keyFor();
  const disallowed = await messages(key, { model: 'echo-1', max_tokens: 5, messages: userText });
  const unknownToList = await messages(key, { model: 'no-such-model', max_tokens: 5, messages: userText });
  const unknown = await messages(unrestricted, { model: 'no-such-model', max_tokens: 5, messages: userText });
  const headerNames = (response: Response) => [...response.headers.keys()].filter((name) => name !== 'date' && name !== 'request-id');
  const headers = (response: Response) => headerNames(response).map((name) => [name, response.headers.get(name)]);
  t.deepEqual(headers(disallowed), headers(unknown));
  t.deepEqual(headers(unknownToList), headers(unknown));
  t.deepEqual(await shapeB(disallowed), notFoundB);
  t.deepEqual(await shapeB(unknownToList), notFoundB);
  t.deepEqual(await shapeB(unknown), notFoundB);
});

test('messages: with a malformed file id, an unknown and a disallowed model still answer alike (400)', async (t) => {
  const key = await gateway.keyFor(undefined, { models: ['claude-test'] });
  const unrestricted = await gateway.keyFor();
  const disallowed = await shapeB(await messages(key, { model: 'echo-1', messages: messagesFile('file-bad') }));
  const unknown = await shapeB(await messages(unrestricted, { model: 'no-such-model', messages: messagesFile('file-bad') }));
  t.deepEqual(disallowed, unknown);
  t.like(disallowed, { status: 400, body: { error: { type: 'invalid_request_error', message: 'Invalid file ID' } } });
});

test('attaching a file needs files:read as well: 403 Forbidden in each shape', async (t) => {
  const key = await gateway.keyFor(['chat:completions', 'messages:create']);
  const fileId = await gateway.storePdf(makePdf(1));
  t.deepEqual(await answer(await chat(key, { model: 'echo-1', messages: chatFile(fileId) })), shapeA(403, 'permission_error', 'forbidden', 'Forbidden'));
  t.like(await shapeB(await messages(key, { model: 'echo-1', messages: messagesFile(fileId) })), {
    status: 403,
    sameId: true,
    body: { type: 'error', error: { type: 'permission_error', message: 'Forbidden' } },
  });
  // Without an attachment the same key is answered.
  t.is((await chat(key, { model: 'echo-1', messages: userText })).status, 200);
});

test('a malformed file id is 400 Invalid file ID, a non-string one too', async (t) => {
  const key = await gateway.keyFor();
  for (const fileId of ['file-short', 'file_abcdefghijklmnopqrstuvwxyz012345', 42, null]) {
    t.deepEqual(
      await answer(await chat(key, { model: 'echo-1', messages: chatFile(fileId) })),
      shapeA(400, 'invalid_request_error', 'invalid_file_id', 'Invalid file ID'),
      String(fileId),
    );
  }
  t.like(await shapeB(await messages(key, { model: 'echo-1', messages: messagesFile('nope') })), {
    status: 400,
    body: { error: { type: 'invalid_request_error', message: 'Invalid file ID' } },
  });
});

test('an unknown, foreign or expired file is 404 File not found in each shape', async (t) => {
  const key = await gateway.keyFor();
  const unknown = 'file-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
  const foreign = await gateway.storePdf(makePdf(1), { account: 'someone-else' });
  const expired = await gateway.storePdf(makePdf(1), { expiresAt: Math.floor(Date.now() / 1000) - 1 });
  for (const fileId of [unknown, foreign, expired]) {
    t.deepEqual(
      await answer(await chat(key, { model: 'echo-1', messages: chatFile(fileId) })),
      shapeA(404, 'invalid_request_error', 'file_not_found', 'File not found'),
    );
    t.like(await shapeB(await messages(key, { model: 'echo-1', max_tokens: 5, messages: messagesFile(fileId) })), {
      status: 404,
      body: { error: { type: 'not_found_error', message: 'File not found' } },
    });
    // A block of `system` is checked as any other: none reaches the upstream unread.
    const system = [{ type: 'document', source: { type: 'file', file_id: fileId } }];
    t.like(await shapeB(await messages(key, { model: 'echo-1', max_tokens: 5, system, messages: [{ role: 'user', content: 'hi' }] })), {
      status: 404,
      body: { error: { type: 'not_found_error', message: 'File not found' } },
    });
  }
});

test('the files attached to one request may total at most maxAttachedBytes', async (t) => {
  const key = await gateway.keyFor();
  const fileId = await gateway.storePdf(makePdf(1, 2600));
  t.is((await chat(key, { model: 'echo-1', messages: chatFile(fileId) })).status, 200);
  // The same file twice is sent twice, so it counts twice.
  const twice = [
    {
      role: 'user',
      content: [
        { type: 'file', file: { file_id: fileId } },
        { type: 'file', file: { file_id: fileId } },
      ],
    },
  ];
  t.deepEqual(
    await answer(await chat(key, { model: 'echo-1', messages: twice })),
    shapeA(400, 'invalid_request_error', 'invalid_request', 'The attached files may total at most 5000 bytes'),
  );
});

test('request bodies: invalid JSON, not an object, too large, no model', async (t) => {
  const key = await gateway.keyFor();
  const raw = (body: string) => fetch(`${gateway.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body });
  t.deepEqual(await answer(await raw('{"model":')), shapeA(400, 'invalid_request_error', 'invalid_json', 'Request body must be valid JSON'));
  t.deepEqual(await answer(await raw('[1]')), shapeA(400, 'invalid_request_error', 'invalid_request', 'Request body must be a JSON object'));
  t.deepEqual(
    await answer(await raw(JSON.stringify({ model: 'echo-1', messages: [{ role: 'user', content: 'x'.repeat(5000) }] }))),
    shapeA(413, 'invalid_request_error', 'request_too_large', 'Request body is too large'),
  );
  for (const model of [undefined, 42, '']) {
    t.deepEqual(
      await answer(await chat(key, { model, messages: userText })),
      shapeA(400, 'invalid_request_error', 'invalid_request', "'model' must be a non-empty string"),
    );
  }
  const noModel = await messages(key, { messages: userText });
  t.like(await shapeB(noModel), { status: 400, body: { error: { type: 'invalid_request_error', message: "'model' must be a non-empty string" } } });
});

test('a body over the limit sent without Content-Length is cut off with 413 too', async (t) => {
  const key = await gateway.keyFor();
  const chunks = [Buffer.from('{"model":"echo-1","padding":"'), Buffer.alloc(8000, 'x'), Buffer.from('"}')];
  const response = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: new ReadableStream({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(chunk);
        controller.close();
      },
    }),
    duplex: 'half',
  } as RequestInit);
  t.is(response.status, 413);
});

test("a declared body over the limit with Connection: close gets its 413, in the endpoint's shape, not a reset", async (t) => {
  // Answered before the body is read: a server that closed at once would reset a client still
  // writing (curl writes the whole body first) before it reads the 413.
  const key = await gateway.keyFor();
  const size = 16 * 1024 ** 2;
  function* body() {
    for (let sent = 0; sent < size; sent += 64 * 1024) yield Buffer.alloc(64 * 1024, 0x20);
  }
  for (const [path, code] of [
    ['/v1/chat/completions', '"code":"request_too_large"'],
    ['/v1/messages', '"type":"request_too_large"'],
  ] as const) {
    const head = `POST ${path} HTTP/1.1\r\nHost: gateway\r\nx-api-key: ${key}\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\nConnection: close\r\n\r\n`;
    const { answer, reset } = await rawExchange(gateway.url, head, body());
    t.false(reset, `${path}: the connection ends cleanly`);
    t.regex(answer, /^HTTP\/1\.1 413 /, path);
    t.true(answer.includes(code), path);
  }
});

test('a model whose provider speaks no format the endpoint translates to is 400, saying so', async (t) => {
  // A provider of its own that only counts tokens: no format to translate a call to.
  const responsesOnly = await modelsApp({
    catalog: [{ id: 'resp-model', provider: 'counts-only' }],
    providers: [{ id: 'counts-only', countTokens: () => Promise.reject(new Error('not called')) }],
  });
  const key = await responsesOnly.keyFor();
  t.deepEqual(
    await answer(await responsesOnly.post('/v1/chat/completions', { model: 'resp-model', messages: userText }, { authorization: `Bearer ${key}` })),
    shapeA(
      400,
      'invalid_request_error',
      'invalid_request',
      "The model 'resp-model' is not served on /v1/chat/completions: its provider speaks no format a Chat Completions call can be translated to",
    ),
  );
  t.like(await shapeB(await responsesOnly.post('/v1/messages', { model: 'resp-model', max_tokens: 5, messages: userText }, { 'x-api-key': key })), {
    status: 400,
    body: {
      error: {
        type: 'invalid_request_error',
        message: "The model 'resp-model' is not served on /v1/messages: its provider speaks no format a Messages call can be translated to",
      },
    },
  });
  await responsesOnly.close();
});

test('without the endpoint scope the handler is never reached: 403 Forbidden', async (t) => {
  const key = await gateway.keyFor(['models:read', 'files:read']);
  t.deepEqual(await answer(await chat(key, { model: 'echo-1', messages: userText })), shapeA(403, 'permission_error', 'forbidden', 'Forbidden'));
});

test('a body nesting arrays and objects more than 128 levels deep is 400, brackets inside strings not counted', async (t) => {
  const key = await gateway.keyFor();
  // The body object is level 1: 127 arrays inside it reach 128.
  const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;
  const body = (levels: number, text = 'hi') =>
    `{"model":"echo-1","messages":[{"role":"user","content":${JSON.stringify(text)}}],"metadata":${nested(levels)}}`;
  const send = (raw: string) => fetch(`${gateway.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: raw });
  t.is((await send(body(127, `\\"${'['.repeat(300)}"\\`))).status, 200);
  t.deepEqual(
    await answer(await send(body(128))),
    shapeA(400, 'invalid_request_error', 'invalid_request', 'Request body must not nest arrays and objects more than 128 levels deep'),
  );
  const deep = await gateway.post(
    '/v1/messages',
    { model: 'echo-1', max_tokens: 5, messages: userText, metadata: JSON.parse(nested(200)) as unknown },
    { 'x-api-key': key },
  );
  t.like(await shapeB(deep), { status: 400, body: { error: { type: 'invalid_request_error' } } });
});

test("messages: a file named anywhere but a document block is refused, never resolved in the operator's upstream workspace", async (t) => {
  const key = await gateway.keyFor();
  const blocks = [
    { type: 'image', source: { type: 'file', file_id: 'file_011CNha8iCJcU1wXNR6q4V8w' } },
    { type: 'container_upload', file_id: 'file_011CNha8iCJcU1wXNR6q4V8w' },
    { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'image', source: { type: 'file', file_id: 'file_x' } }] },
  ];
  for (const block of blocks) {
    for (const model of ['echo-1', 'claude-test']) {
      const response = await messages(key, { model, max_tokens: 10, messages: [{ role: 'user', content: [block] }] });
      const body = (await response.json()) as { type: string; error: { type: string; message: string } };
      t.is(response.status, 400, `${block.type} on ${model}`);
      t.is(body.error.type, 'invalid_request_error');
      t.regex(body.error.message, /document/);
    }
  }
  t.is(gateway.reported.length, 0);
});

test("modelsRouter()'s nowMs is the default model limiter's clock: a key's minute ends when that clock says so", async (t) => {
  let now = Date.parse('2030-01-15T12:00:30Z');
  const gateway = await modelsApp({ nowMs: () => now });
  t.teardown(gateway.close);
  const key = await gateway.keyFor(undefined, { limits: { requestsPerMinute: 1 } });
  const call = () => gateway.post('/v1/chat/completions', { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${key}` });
  t.is((await call()).status, 200);
  const refused = await call();
  t.is(refused.status, 429);
  t.is(refused.headers.get('retry-after'), '30');
  now += 30_000;
  t.is((await call()).status, 200);
});

test('a body naming thousands of unknown file ids costs one store lookup, not one per id', async (t) => {
  const key = await countedGateway.keyFor();
  const now = Math.floor(Date.now() / 1000);
  const parts = Array.from({ length: 5000 }, () => ({ type: 'file', file: { file_id: newFileId(now) } }));
  const before = lookups();
  const response = await countedGateway.post(
    '/v1/chat/completions',
    { model: 'echo-1', messages: [{ role: 'user', content: parts }] },
    { authorization: `Bearer ${key}` },
  );
  t.is(response.status, 404);
  t.like(await response.json(), { error: { code: 'file_not_found' } });
  t.is(lookups() - before, 1);
});
