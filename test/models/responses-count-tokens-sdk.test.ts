import { PassThrough } from 'node:stream';
import Anthropic from '@anthropic-ai/sdk';
import test from 'ava';
import OpenAI from 'openai';
import { findResponseObject, responseUsage } from '../../lib/models/formats/responses/endpoint.js';
import { ANTHROPIC_PROVIDER_KEY, OPENAI_PROVIDER_KEY, catalogProviders, modelsApp, type ModelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { anthropicMessage, reply, replyEvents, scriptedUpstream, type ScriptedUpstream } from '../helpers/models-upstream.js';

// The Responses and count_tokens endpoints, and the official SDKs as clients of the composed
// gateway, in front of a real upstream whose answers each test scripts: the tests run serially.
let upstream: ScriptedUpstream;
let gateway: ModelsApp;
test.before(async () => {
  upstream = await scriptedUpstream();
  gateway = await modelsApp({ providers: catalogProviders(upstream.url) });
});
test.after.always(() => Promise.all([gateway?.close(), upstream?.close()]));

const REQUEST_ID = /^req_[A-Za-z0-9]{32}$/;

// POST /v1/responses.
const create = (key: string, body: unknown) => gateway.post('/v1/responses', body, { authorization: `Bearer ${key}` });
const shapeA = (type: string, code: string, message: string) => ({ error: { message, type, param: null, code } });
const answer = async (response: Response) => [response.status, await response.json()] as const;
const withFile = (fileId: unknown) => [
  {
    role: 'user',
    content: [
      { type: 'input_text', text: 'Read it.' },
      { type: 'input_file', file_id: fileId },
    ],
  },
];

const upstreamAnswer = {
  id: 'resp_upstream',
  object: 'response',
  created_at: 1_744_000_000,
  status: 'completed',
  model: 'gpt-4o-mini-2024-07-18',
  output: [{ id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'A report.', annotations: [] }] }],
  usage: { input_tokens: 12, output_tokens: 2, total_tokens: 14 },
};

test.serial('the allowlist policy of Chat Completions: 403 with the exact message outside it, existing or not; 404 for an unknown model', async (t) => {
  const restricted = await gateway.keyFor(undefined, { models: ['gpt-test'] });
  for (const model of ['echo-1', 'no-such-model']) {
    t.deepEqual(await answer(await create(restricted, { model, input: 'hi' })), [
      403,
      shapeA('permission_error', 'forbidden', `Model '${model}' is not allowed for this API key`),
    ]);
  }
  t.deepEqual(await answer(await create(await gateway.keyFor(), { model: 'no-such-model', input: 'hi' })), [
    404,
    shapeA('invalid_request_error', 'model_not_found', "The model 'no-such-model' does not exist"),
  ]);
});

test.serial('needs responses:create; a model whose provider speaks no format a Responses call translates to is 400', async (t) => {
  t.deepEqual(await answer(await create(await gateway.keyFor(['chat:completions', 'files:read']), { model: 'echo-1', input: 'hi' })), [
    403,
    shapeA('permission_error', 'forbidden', 'Forbidden'),
  ]);
  const counting = await modelsApp({
    catalog: [{ id: 'counter', provider: 'counts-only' }],
    providers: [{ id: 'counts-only', countTokens: () => Promise.reject(new Error('not called')) }],
  });
  const [status, body] = await answer(
    await counting.post('/v1/responses', { model: 'counter', input: 'hi' }, { authorization: `Bearer ${await counting.keyFor()}` }),
  );
  await counting.close();
  t.is(status, 400);
  t.like(body, {
    error: {
      type: 'invalid_request_error',
      message: "The model 'counter' is not served on /v1/responses: its provider speaks no format a Responses call can be translated to",
    },
  });
});

test.serial('input_file by file_id: needs files:read, 400 when malformed, 404 when foreign; no other part may name a file', async (t) => {
  const foreign = await gateway.storePdf(makePdf(1), { account: 'someone-else' });
  t.deepEqual(await answer(await create(await gateway.keyFor(['responses:create']), { model: 'echo-1', input: withFile(foreign) })), [
    403,
    shapeA('permission_error', 'forbidden', 'Forbidden'),
  ]);
  const key = await gateway.keyFor();
  t.deepEqual(await answer(await create(key, { model: 'echo-1', input: withFile('file-nope') })), [
    400,
    shapeA('invalid_request_error', 'invalid_file_id', 'Invalid file ID'),
  ]);
  t.deepEqual(await answer(await create(key, { model: 'echo-1', input: withFile(foreign) })), [
    404,
    shapeA('invalid_request_error', 'file_not_found', 'File not found'),
  ]);
  const image = [{ role: 'user', content: [{ type: 'input_image', file_id: foreign }] }];
  const [status, body] = await answer(await create(key, { model: 'echo-1', input: image }));
  t.is(status, 400);
  t.like(body, { error: { message: 'Files are attached as {"type":"input_file","file_id"} parts only' } });
});

test.serial('an openai provider gets {baseURL}/responses with the upstream model, the PDF itself and its own key', async (t) => {
  const from = upstream.received.length;
  upstream.answer('/v1/responses', reply(200, upstreamAnswer));
  const pdf = makePdf(2, 300);
  const fileId = await gateway.storePdf(pdf, { filename: 'q3.pdf' });
  const response = await create(await gateway.keyFor(), { model: 'gpt-test', instructions: 'Be brief.', input: withFile(fileId) });
  t.is(response.status, 200);
  t.regex(response.headers.get('x-request-id') ?? '', /^req_[A-Za-z0-9]{32}$/);
  t.like(await response.json(), { id: upstreamAnswer.id, output: upstreamAnswer.output, usage: upstreamAnswer.usage });
  const received = upstream.received.slice(from).map(({ path, headers, body }) => ({ path, authorization: headers.authorization, body }));
  t.deepEqual(received, [
    {
      path: '/v1/responses',
      authorization: `Bearer ${OPENAI_PROVIDER_KEY}`,
      body: {
        model: 'gpt-4o-mini-2024-07-18',
        instructions: 'Be brief.',
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'Read it.' },
              { type: 'input_file', filename: 'q3.pdf', file_data: `data:application/pdf;base64,${pdf.toString('base64')}` },
            ],
          },
        ],
      },
    },
  ]);
});

test.serial('a streamed answer passes through event by event; a failure after that is an error event', async (t) => {
  const events = new PassThrough();
  upstream.answer('/v1/responses', replyEvents(events));
  const created = `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', sequence_number: 0, response: { ...upstreamAnswer, status: 'in_progress', output: [], usage: null } })}\n\n`;
  events.write(created);
  const response = await create(await gateway.keyFor(), { model: 'gpt-test', input: 'hi', stream: true });
  t.is(response.status, 200);
  t.regex(response.headers.get('content-type') ?? '', /^text\/event-stream/);
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const first = (await reader.read()).value ?? '';
  t.true(first.startsWith('event: response.created\ndata: '));
  t.like(JSON.parse(first.slice(first.indexOf('{'))), { type: 'response.created', sequence_number: 0, response: { id: 'resp_upstream' } });
  events.destroy(new Error('connection reset'));
  let rest = '';
  for (let read = await reader.read(); !read.done; read = await reader.read()) rest += read.value;
  t.is(
    rest,
    `event: error\ndata: ${JSON.stringify({ type: 'error', code: 'upstream_error', message: 'Upstream provider error', param: null, sequence_number: 0 })}\n\n`,
  );
});

test.serial('findResponseObject() and responseUsage() find the model and the usage where a Responses answer keeps them, whole or streamed', async (t) => {
  const key = await gateway.keyFor();
  const body = { model: 'echo-1', instructions: 'Be brief.', input: 'Count my words' };
  const whole = (await (await create(key, body)).json()) as Record<string, unknown>;
  const response = findResponseObject(whole, false);
  t.is(typeof response?.model, 'string');
  t.deepEqual(responseUsage(response ?? {}), { inputTokens: 5, outputTokens: 18, cacheReadTokens: 0, cacheWriteTokens: 0 });

  const streamed = await (await create(key, { ...body, stream: true })).text();
  const events = streamed
    .split('\n\n')
    .filter((event) => event !== '')
    .map((event) => JSON.parse(event.slice(event.indexOf('data: ') + 6)) as Record<string, unknown>);
  const found = events.flatMap((event) => {
    const object = findResponseObject(event, true);
    return object === undefined ? [] : [{ type: event.type, model: object.model, usage: responseUsage(object) }];
  });
  t.deepEqual(found, [
    { type: 'response.created', model: response?.model, usage: undefined },
    { type: 'response.in_progress', model: response?.model, usage: undefined },
    { type: 'response.completed', model: response?.model, usage: { inputTokens: 5, outputTokens: 18, cacheReadTokens: 0, cacheWriteTokens: 0 } },
  ]);
});

test('responseUsage() reads the tokens read from and written to the cache, each on its own', (t) => {
  const usage = { input_tokens: 1200, output_tokens: 40, input_tokens_details: { cached_tokens: 1000, cache_write_tokens: 150 } };
  t.deepEqual(responseUsage({ usage }), { inputTokens: 1200, outputTokens: 40, cacheReadTokens: 1000, cacheWriteTokens: 150 });
  const older = { input_tokens: 12, output_tokens: 4, input_tokens_details: { cached_tokens: 0 } };
  t.deepEqual(responseUsage({ usage: older }), { inputTokens: 12, outputTokens: 4, cacheReadTokens: 0 });
});

// POST /v1/messages/count_tokens.
const count = (key: string, body: unknown, headers: Record<string, string> = {}) =>
  gateway.post('/v1/messages/count_tokens', body, { 'x-api-key': key, 'anthropic-version': '2023-06-01', ...headers });

/** A Messages-style answer: status and body, with a request-id header that an error body repeats. */
async function shapeB(t: { is(a: unknown, b: unknown): void; regex(a: string, r: RegExp): void }, response: Response) {
  const body = (await response.json()) as { request_id?: string };
  const requestId = response.headers.get('request-id') ?? '';
  t.regex(requestId, REQUEST_ID);
  if (response.status >= 400) t.is(body.request_id, requestId);
  return [response.status, { ...body, request_id: undefined }] as const;
}

const errorB = (type: string, message: string) => ({ type: 'error', error: { type, message }, request_id: undefined });

test.serial(
  'an anthropic provider gets {baseURL}/v1/messages/count_tokens with the upstream model, the PDF itself, its key and the client headers',
  async (t) => {
    const from = upstream.received.length;
    upstream.answer('/v1/messages/count_tokens', reply(200, { input_tokens: 1234 }));
    const pdf = makePdf(1, 100);
    const fileId = await gateway.storePdf(pdf, { filename: 'brief.pdf' });
    const key = await gateway.keyFor();
    const response = await count(
      key,
      { model: 'claude-test', messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: fileId } }] }] },
      { 'anthropic-beta': 'files-api-2025-04-14' },
    );
    t.deepEqual(await shapeB(t, response), [200, { input_tokens: 1234, request_id: undefined }]);
    const [received] = upstream.received.slice(from);
    t.is(received?.path, '/v1/messages/count_tokens');
    t.like(received?.headers, { 'x-api-key': ANTHROPIC_PROVIDER_KEY, 'anthropic-version': '2023-06-01', 'anthropic-beta': 'files-api-2025-04-14' });
    t.deepEqual(received?.body, {
      model: 'claude-sonnet-4-5-20250929',
      messages: [
        {
          role: 'user',
          content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: pdf.toString('base64') }, title: 'brief.pdf' }],
        },
      ],
    });
  },
);

test.serial('echo estimates the count: the words of the messages and the system prompt', async (t) => {
  const response = await count(await gateway.keyFor(['messages:create']), {
    model: 'echo-1',
    system: 'You are terse.',
    messages: [
      { role: 'user', content: 'How many words here?' },
      { role: 'assistant', content: [{ type: 'text', text: 'Some.' }] },
    ],
  });
  t.deepEqual(await shapeB(t, response), [200, { input_tokens: 8, request_id: undefined }]);
});

test.serial('the allowlist as on Messages: an unknown and a disallowed model get the same 404; a count is never streamed', async (t) => {
  const restricted = await gateway.keyFor(undefined, { models: ['claude-test'] });
  const userText = [{ role: 'user', content: 'hi' }];
  const notFound = [404, errorB('not_found_error', 'Model not found')];
  t.deepEqual(await shapeB(t, await count(restricted, { model: 'echo-1', messages: userText })), notFound);
  t.deepEqual(await shapeB(t, await count(await gateway.keyFor(), { model: 'no-such-model', messages: userText })), notFound);
  t.deepEqual(await shapeB(t, await count(await gateway.keyFor(['chat:completions']), { model: 'echo-1', messages: userText })), [
    403,
    errorB('permission_error', 'Forbidden'),
  ]);
  // A provider without a counting endpoint gets an estimate, made without calling it.
  const estimated = await count(await gateway.keyFor(), { model: 'gpt-test', messages: userText });
  t.is(estimated.status, 200);
  t.deepEqual(await estimated.json(), { input_tokens: 1 });
  t.deepEqual(await shapeB(t, await count(await gateway.keyFor(), { model: 'echo-1', messages: userText, stream: true })), [
    400,
    errorB('invalid_request_error', 'stream: Extra inputs are not permitted'),
  ]);
});

test.serial('every path under /v1/messages answers in Shape B with request-id, unknown ones 404 not_found_error', async (t) => {
  const key = await gateway.keyFor();
  const get = (path: string) => fetch(`${gateway.url}${path}`, { headers: { 'x-api-key': key } });
  t.deepEqual(await shapeB(t, await get('/v1/messages/batches')), [404, errorB('not_found_error', 'Unknown request URL: GET /v1/messages/batches')]);
  t.deepEqual(await shapeB(t, await get('/v1/messages/count_tokens')), [405, errorB('invalid_request_error', 'Method GET is not allowed on this URL')]);
  const unauthenticated = await fetch(`${gateway.url}/v1/messages/anything`, { method: 'POST' });
  t.deepEqual(await shapeB(t, unauthenticated), [401, errorB('authentication_error', 'Invalid API key')]);
});

// The official SDKs, each as its users call it.
const openai = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
const anthropic = (apiKey: string) => new Anthropic({ apiKey, baseURL: gateway.url, maxRetries: 0 });
const pdf = makePdf(3, 200);

test.serial('openai SDK: chat.completions.create against echo, with a stored PDF attached by file id', async (t) => {
  const fileId = await gateway.storePdf(pdf, { filename: 'slides.pdf' });
  const completion = await openai(await gateway.keyFor()).chat.completions.create({
    model: 'echo-1',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Describe it.' },
          { type: 'file', file: { file_id: fileId } },
        ],
      },
    ],
  });
  t.is(completion.object, 'chat.completion');
  t.is(
    completion.choices[0]?.message.content,
    `Echo from echo-upstream-1: received 1 message.\nThe last user message says: "Describe it."\nDocument 1: slides.pdf, ${pdf.length} bytes, 3 pages.`,
  );
});

test.serial('openai SDK: streaming against echo', async (t) => {
  const stream = await openai(await gateway.keyFor()).chat.completions.create({
    model: 'echo-1',
    stream: true,
    messages: [{ role: 'user', content: 'stream please' }],
  });
  let text = '';
  let chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    text += chunk.choices[0]?.delta.content ?? '';
  }
  t.true(chunks > 2);
  t.is(text, 'Echo from echo-upstream-1: received 1 message.\nThe last user message says: "stream please"\nNo documents are attached.');
});

test.serial('openai SDK: against an OpenAI upstream, whole and streamed', async (t) => {
  const client = openai(await gateway.keyFor());
  upstream.answer(
    '/v1/chat/completions',
    reply(200, {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1,
      model: 'gpt-4o-mini-2024-07-18',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hi from upstream', refusal: null }, logprobs: null, finish_reason: 'stop' }],
    }),
  );
  const completion = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] });
  t.is(completion.choices[0]?.message.content, 'Hi from upstream');

  const chunk = (content: string) =>
    `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
  upstream.answer('/v1/chat/completions', reply(200, [chunk('Hi '), chunk('there'), 'data: [DONE]\n\n'].join(''), { 'content-type': 'text/event-stream' }));
  let text = '';
  for await (const part of await client.chat.completions.create({ model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'hi' }] })) {
    text += part.choices[0]?.delta.content ?? '';
  }
  t.is(text, 'Hi there');
});

test.serial('openai SDK: a failure mid-stream surfaces as an APIError with our message', async (t) => {
  const body = new PassThrough();
  upstream.answer('/v1/chat/completions', replyEvents(body));
  body.write(
    `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] })}\n\n`,
  );
  const stream = await openai(await gateway.keyFor()).chat.completions.create({ model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  const error = await t.throwsAsync(
    async () => {
      for await (const part of stream) {
        t.is(part.choices[0]?.delta.content, 'Hi');
        body.destroy(new Error('upstream connection reset'));
      }
    },
    { instanceOf: OpenAI.APIError },
  );
  t.is(error?.message, 'Upstream provider error');
  t.like(error?.error, { type: 'server_error', code: 'upstream_error' });
});

test.serial('openai SDK: 401, 403 and 404 as AuthenticationError, PermissionDeniedError and NotFoundError with our request id', async (t) => {
  const cases: Array<[string, string, new (...args: never[]) => InstanceType<typeof OpenAI.APIError>, number, string, string]> = [
    ['kmg_sk_not-a-key', 'echo-1', OpenAI.AuthenticationError, 401, 'invalid_api_key', 'Invalid API key'],
    [
      await gateway.keyFor(undefined, { models: ['gpt-test'] }),
      'echo-1',
      OpenAI.PermissionDeniedError,
      403,
      'forbidden',
      "Model 'echo-1' is not allowed for this API key",
    ],
    [await gateway.keyFor(), 'no-such-model', OpenAI.NotFoundError, 404, 'model_not_found', "The model 'no-such-model' does not exist"],
  ];
  for (const [key, model, errorClass, status, code, message] of cases) {
    const error = await t.throwsAsync(openai(key).chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }), {
      instanceOf: errorClass,
    });
    t.is(error?.status, status);
    t.is(error?.code, code);
    t.is(error?.error && (error.error as { message?: string }).message, message);
    t.regex(error?.requestID ?? '', REQUEST_ID);
  }
});

test.serial('anthropic SDK: messages.create against echo, with a stored PDF attached by file id', async (t) => {
  const fileId = await gateway.storePdf(pdf, { filename: 'lease.pdf' });
  const message = await anthropic(await gateway.keyFor()).messages.create({
    model: 'echo-1',
    max_tokens: 100,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'document', source: { type: 'file', file_id: fileId } },
          { type: 'text', text: 'Key terms?' },
        ],
      },
    ],
  });
  t.is(message.type, 'message');
  t.deepEqual(message.content, [
    {
      type: 'text',
      text: `Echo from echo-upstream-1: received 1 message.\nThe last user message says: "Key terms?"\nDocument 1: lease.pdf, ${pdf.length} bytes, 3 pages.`,
    },
  ]);
});

test.serial('anthropic SDK: streaming against echo', async (t) => {
  const stream = anthropic(await gateway.keyFor()).messages.stream({
    model: 'echo-1',
    max_tokens: 100,
    messages: [{ role: 'user', content: 'stream please' }],
  });
  let text = '';
  stream.on('text', (delta) => {
    text += delta;
  });
  const final = await stream.finalMessage();
  t.is(final.stop_reason, 'end_turn');
  t.is(text, 'Echo from echo-upstream-1: received 1 message.\nThe last user message says: "stream please"\nNo documents are attached.');
});

test.serial('anthropic SDK: against an Anthropic upstream, whole and streamed', async (t) => {
  const client = anthropic(await gateway.keyFor());
  upstream.answer('/v1/messages', reply(200, anthropicMessage('Hi from upstream')));
  const message = await client.messages.create({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
  t.deepEqual(message.content, [{ type: 'text', text: 'Hi from upstream' }]);

  const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  upstream.answer(
    '/v1/messages',
    reply(
      200,
      [
        event('message_start', {
          message: {
            id: 'msg_2',
            type: 'message',
            role: 'assistant',
            model: 'claude',
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: 1, output_tokens: 0 },
          },
        }),
        event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
        event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hi ' } }),
        event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'there' } }),
        event('content_block_stop', { index: 0 }),
        event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 2 } }),
        event('message_stop', {}),
      ].join(''),
      { 'content-type': 'text/event-stream' },
    ),
  );
  const final = await client.messages.stream({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
  t.like(final.content[0], { type: 'text', text: 'Hi there' });
});

test.serial('anthropic SDK: a failure mid-stream surfaces as an APIError', async (t) => {
  const body = new PassThrough();
  upstream.answer('/v1/messages', replyEvents(body));
  body.write(
    `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { id: 'msg_3', type: 'message', role: 'assistant', model: 'claude', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 0 } } })}\n\n`,
  );
  const stream = await anthropic(await gateway.keyFor()).messages.create({
    model: 'claude-test',
    max_tokens: 10,
    stream: true,
    messages: [{ role: 'user', content: 'hi' }],
  });
  const error = await t.throwsAsync(
    async () => {
      for await (const event of stream) {
        t.is(event.type, 'message_start');
        body.destroy(new Error('upstream connection reset'));
      }
    },
    { instanceOf: Anthropic.APIError },
  );
  t.like(error?.error, { type: 'error', error: { type: 'api_error', message: 'Upstream provider error' } });
});

test.serial('anthropic SDK: 401, 403 and 404 as AuthenticationError, PermissionDeniedError and NotFoundError with our request id', async (t) => {
  const fileId = await gateway.storePdf(pdf);
  const attach = [{ role: 'user' as const, content: [{ type: 'document' as const, source: { type: 'file' as const, file_id: fileId } }] }];
  const plain = [{ role: 'user' as const, content: 'hi' }];
  const cases: Array<
    [string, string, typeof plain | typeof attach, new (...args: never[]) => InstanceType<typeof Anthropic.APIError>, number, string, string]
  > = [
    ['kmg_sk_not-a-key', 'echo-1', plain, Anthropic.AuthenticationError, 401, 'authentication_error', 'Invalid API key'],
    [await gateway.keyFor(['messages:create']), 'echo-1', attach, Anthropic.PermissionDeniedError, 403, 'permission_error', 'Forbidden'],
    [await gateway.keyFor(undefined, { models: ['claude-test'] }), 'echo-1', plain, Anthropic.NotFoundError, 404, 'not_found_error', 'Model not found'],
    [await gateway.keyFor(), 'no-such-model', plain, Anthropic.NotFoundError, 404, 'not_found_error', 'Model not found'],
  ];
  for (const [key, model, messages, errorClass, status, type, message] of cases) {
    const error = await t.throwsAsync(anthropic(key).messages.create({ model, max_tokens: 10, messages }), { instanceOf: errorClass });
    t.is(error?.status, status);
    t.regex(error?.requestID ?? '', REQUEST_ID);
    t.deepEqual(error?.error, { type: 'error', error: { type, message }, request_id: error?.requestID });
  }
});
