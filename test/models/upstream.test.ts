import { once } from 'node:events';
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type RequestListener } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import { setTimeout } from 'node:timers/promises';
import test from 'ava';
import { GatewayError } from '../../lib/errors/gateway-error.js';
import type { ProviderAnswer } from '../../lib/models/provider.js';
import { anthropicProvider } from '../../lib/models/providers/anthropic/index.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { UpstreamCall } from '../../lib/models/upstream-call.js';
import { loopbackPair } from '../helpers/http.js';
import { ANTHROPIC_PROVIDER_KEY, OPENAI_PROVIDER_KEY, catalogProviders, modelsApp } from '../helpers/models-app.js';
import { until } from '../helpers/poll.js';
import { makePdf } from '../helpers/models-pdf.js';
import {
  anthropicMessage,
  reply,
  replyEvents,
  scriptedUpstream,
  streamingUpstream,
  type UpstreamRequest,
  type UpstreamAnswer,
} from '../helpers/models-upstream.js';

// A real upstream, its answers scripted by each test: the tests run serially.
const upstream = await scriptedUpstream();
const providers = catalogProviders(upstream.url);
const gateway = await modelsApp({ timeoutMs: 20_000, providers });
// The same gateway with a short upstream timeout, for the timeout cases only.
const impatient = await modelsApp({ timeoutMs: 300, providers });

// Real sockets: the redirecting upstream, and another server where it points.
/** A server on a random loopback port, answering with `handler`. */
async function serve(handler: RequestListener) {
  const server = createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

// Another port is another origin: where a redirecting upstream would send the request.
const elsewhereSaw: IncomingHttpHeaders[] = [];
const elsewhere = await serve((req, res) => {
  elsewhereSaw.push(req.headers);
  res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"x","type":"message","content":[]}');
});
const redirecting = await serve((req, res) => {
  req.resume();
  res.writeHead(Number(req.url?.split('/')[1]), { location: `http://127.0.0.1:${elsewhere.port}/stolen` }).end();
});

const PROVIDER_KEY = 'sk-provider-never-elsewhere';
const statuses = [301, 302, 307, 308];
const redirectGateway = await modelsApp({
  providers: statuses.flatMap((status) => [
    openAIProvider({ id: `openai-${status}`, baseURL: `http://127.0.0.1:${redirecting.port}/${status}`, apiKey: PROVIDER_KEY }),
    anthropicProvider({ id: `anthropic-${status}`, baseURL: `http://127.0.0.1:${redirecting.port}/${status}`, apiKey: PROVIDER_KEY }),
  ]),
  catalog: statuses.flatMap((status) => [
    { id: `gpt-${status}`, provider: `openai-${status}`, upstreamModel: 'gpt', created: 1 },
    { id: `claude-${status}`, provider: `anthropic-${status}`, upstreamModel: 'claude', created: 1 },
  ]),
});

// Real sockets: the upstream is a local server, or a port where nothing listens.
const streaming = await streamingUpstream();
const closed = await serve(() => undefined);
const closedPort = closed.port;
await closed.close();

const streamingGateway = await modelsApp({
  providers: [
    openAIProvider({ id: 'openai', baseURL: `${streaming.url}/v1`, apiKey: 'sk-provider' }),
    anthropicProvider({ id: 'anthropic', baseURL: streaming.url, apiKey: 'sk-provider' }),
    openAIProvider({ id: 'gone', baseURL: `http://127.0.0.1:${closedPort}/v1`, apiKey: 'sk-provider' }),
  ],
  catalog: [
    { id: 'gpt-test', provider: 'openai', upstreamModel: 'gpt-up', created: 1 },
    { id: 'claude-test', provider: 'anthropic', upstreamModel: 'claude-up', created: 1 },
    { id: 'gone-test', provider: 'gone', upstreamModel: 'gone-up', created: 1 },
  ],
});

test.after.always(() =>
  Promise.all([
    gateway.close(),
    impatient.close(),
    upstream.close(),
    redirectGateway.close(),
    elsewhere.close(),
    redirecting.close(),
    streamingGateway.close(),
    streaming.close(),
  ]),
);
// Each test sees what the scripted upstream received during it.
test.beforeEach(() => upstream.received.splice(0));

const chat = (key: string, body: unknown) => gateway.post('/v1/chat/completions', body, { authorization: `Bearer ${key}` });
const messages = (key: string, body: unknown, headers: Record<string, string> = {}) => gateway.post('/v1/messages', body, { 'x-api-key': key, ...headers });

const openAIAnswer = {
  id: 'chatcmpl-upstream',
  object: 'chat.completion',
  created: 1_744_000_000,
  model: 'gpt-4o-mini-2024-07-18',
  choices: [{ index: 0, message: { role: 'assistant', content: 'It is a report.', refusal: null }, logprobs: null, finish_reason: 'stop' }],
  usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 },
};
const anthropicAnswer = anthropicMessage('It is a contract.');

/** Every header value the upstream got, to look for the gateway key in any of them. */
const headerValues = (received: UpstreamRequest) => Object.values(received.headers).flat().join('\n');

test.serial('chat completions: the upstream gets the upstream model, the PDF itself and the provider key, never the gateway key', async (t) => {
  upstream.answer('/v1/chat/completions', reply(200, openAIAnswer, { 'x-request-id': 'req_upstream' }));
  const key = await gateway.keyFor();
  const pdf = makePdf(2, 500);
  const fileId = await gateway.storePdf(pdf, { filename: 'q3 report.pdf' });
  const response = await chat(key, {
    model: 'gpt-test',
    temperature: 0.2,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          { type: 'file', file: { file_id: fileId } },
        ],
      },
    ],
  });
  t.is(response.status, 200);
  t.deepEqual(await response.json(), { ...openAIAnswer, model: 'gpt-test' });
  const ours = response.headers.get('x-request-id') ?? '';
  t.regex(ours, /^req_[A-Za-z0-9]{32}$/);

  const [received] = upstream.received;
  if (!received) return t.fail('the upstream was not called');
  t.is(received.path, '/v1/chat/completions');
  t.is(received.headers.authorization, `Bearer ${OPENAI_PROVIDER_KEY}`);
  t.is(received.headers['x-api-key'], undefined);
  t.false(headerValues(received).includes(key));
  t.false(JSON.stringify(received.body).includes(key));
  t.deepEqual(received.body, {
    model: 'gpt-4o-mini-2024-07-18',
    temperature: 0.2,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          { type: 'file', file: { filename: 'q3 report.pdf', file_data: `data:application/pdf;base64,${pdf.toString('base64')}` } },
        ],
      },
    ],
  });
});

test.serial('messages: the upstream gets the provider key, the PDF as a base64 document, and the client anthropic headers', async (t) => {
  upstream.answer('/v1/messages', reply(200, anthropicAnswer), 2);
  const key = await gateway.keyFor();
  const pdf = makePdf(4, 300);
  const fileId = await gateway.storePdf(pdf, { filename: 'contract.pdf' });
  const body = {
    model: 'claude-test',
    max_tokens: 200,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'document', source: { type: 'file', file_id: fileId }, cache_control: { type: 'ephemeral' } },
          { type: 'text', text: 'Summarise.' },
        ],
      },
    ],
  };
  const response = await messages(key, body, { 'anthropic-version': '2023-06-01', 'anthropic-beta': 'files-api-2025-04-14', authorization: `Bearer ${key}` });
  t.is(response.status, 200);
  t.deepEqual(await response.json(), { ...anthropicAnswer, model: 'claude-test' });
  t.regex(response.headers.get('request-id') ?? '', /^req_[A-Za-z0-9]{32}$/);

  const [received] = upstream.received;
  if (!received) return t.fail('the upstream was not called');
  t.is(received.headers['x-api-key'], ANTHROPIC_PROVIDER_KEY);
  t.is(received.headers.authorization, undefined);
  t.is(received.headers['anthropic-version'], '2023-06-01');
  t.is(received.headers['anthropic-beta'], 'files-api-2025-04-14');
  t.false(headerValues(received).includes(key));
  t.deepEqual(received.body, {
    model: 'claude-sonnet-4-5-20250929',
    max_tokens: 200,
    messages: [
      {
        role: 'user',
        content: [
          {
            type: 'document',
            source: { type: 'base64', media_type: 'application/pdf', data: pdf.toString('base64') },
            cache_control: { type: 'ephemeral' },
            title: 'contract.pdf',
          },
          { type: 'text', text: 'Summarise.' },
        ],
      },
    ],
  });

  // Without an anthropic-version of the client's, the default one is sent; no anthropic-beta.
  await messages(key, { ...body, messages: [{ role: 'user', content: 'hi' }] });
  t.is(upstream.received[1]?.headers['anthropic-version'], '2023-06-01');
  t.is(upstream.received[1]?.headers['anthropic-beta'], undefined);
  t.is(upstream.pending, 0);
});

const sseOpenAI = [
  'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n',
  'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}\n\n',
  'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\n',
  'data: [DONE]\n\n',
];
const sseAnthropic = [
  'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":0}}}\n\n',
  'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
  'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}\n\n',
  'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
  'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}\n\n',
  'event: message_stop\ndata: {"type":"message_stop"}\n\n',
];

/** An upstream event as the client gets it: naming the catalog id. */
const asClient = (event: string) => event.replace('"model":"gpt-4o-mini"', '"model":"gpt-test"').replace('"model":"claude"', '"model":"claude-test"');

/** Reads `response` until `count` events (blank-line separated) have arrived. */
async function readEvents(reader: ReadableStreamDefaultReader<Uint8Array>, count: number): Promise<string> {
  const decoder = new TextDecoder();
  let text = '';
  while (text.split('\n\n').length - 1 < count) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  return text;
}

for (const [name, path, events, call] of [
  [
    'chat completions',
    '/v1/chat/completions',
    sseOpenAI,
    (key: string) => chat(key, { model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  ],
  [
    'messages',
    '/v1/messages',
    sseAnthropic,
    (key: string) => messages(key, { model: 'claude-test', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  ],
] as const) {
  test.serial(`${name}: a stream passes through event by event, each as soon as the upstream sends it`, async (t) => {
    t.timeout(20_000, 'an event held back by the gateway never arrives');
    const body = new PassThrough();
    upstream.answer(path, replyEvents(body));
    body.write(events[0] ?? '');
    const response = await call(await gateway.keyFor());
    t.is(response.status, 200);
    t.is(response.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    t.is(response.headers.get('content-encoding'), null);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    // The first event arrives while the upstream has sent nothing more.
    t.is(await readEvents(reader, 1), asClient(events[0] ?? ''));
    // An event split across writes is passed on once it is whole.
    const second = events[1] ?? '';
    body.write(second.slice(0, 20));
    body.write(second.slice(20));
    t.is(await readEvents(reader, 1), asClient(second));
    for (const event of events.slice(2)) body.write(event);
    body.end();
    t.is(await readEvents(reader, events.length - 2), events.slice(2).map(asClient).join(''));
    t.true((await reader.read()).done);
    t.is(upstream.received[0]?.body.stream, true);
  });
}

test.serial('chat completions: an upstream failure mid-stream ends the stream with an OpenAI error event', async (t) => {
  const body = new PassThrough();
  upstream.answer('/v1/chat/completions', replyEvents(body));
  body.write(sseOpenAI[0] ?? '');
  const reported = gateway.reported.length;
  const response = await chat(await gateway.keyFor(), { model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  t.is(response.status, 200);
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  t.is(await readEvents(reader, 1), asClient(sseOpenAI[0] ?? ''));
  body.destroy(new Error('socket hang up at 10.1.2.3'));
  t.is(await readEvents(reader, 2), 'data: {"error":{"message":"Upstream provider error","type":"server_error","param":null,"code":"upstream_error"}}\n\n');
  t.true((await reader.read()).done);
  const err = gateway.reported[reported];
  t.true(err instanceof GatewayError && err.status === 502, 'reported on app.on("error")');
});

// What an upstream's error event says is its own: its address, its key, the prompt. The client and
// the log get the gateway's words and the event's error type at most.
const UPSTREAM_SECRET = 'at 10.9.9.9 with key sk-upstream-secret';
const nativeErrorEvents = [
  {
    endpoint: 'chat completions',
    path: '/v1/chat/completions',
    first: sseOpenAI[0] ?? '',
    error: `data: {"error":{"message":"Overloaded ${UPSTREAM_SECRET}","type":"server_error","code":"overloaded"}}\n\n`,
    send: async () => chat(await gateway.keyFor(), { ...chatBody, stream: true }),
    ours: 'data: {"error":{"message":"Upstream provider error","type":"server_error","param":null,"code":"upstream_error"}}\n\n',
  },
  {
    endpoint: 'messages',
    path: '/v1/messages',
    first: sseAnthropic[0] ?? '',
    error: `event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded ${UPSTREAM_SECRET}"}}\n\n`,
    send: async () => messages(await gateway.keyFor(), { ...messagesBody, stream: true }),
    ours: 'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"Upstream provider error"},"request_id":"REQUEST_ID"}\n\n',
  },
  {
    endpoint: 'responses',
    path: '/v1/responses',
    first: `event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","model":"gpt-4o-mini","status":"in_progress","output":[],"usage":null}}\n\n`,
    error: `event: error\ndata: {"type":"error","code":"server_error","message":"Overloaded ${UPSTREAM_SECRET}","param":null,"sequence_number":1}\n\n`,
    send: async () => gateway.post('/v1/responses', { model: 'gpt-test', input: 'hi', stream: true }, { authorization: `Bearer ${await gateway.keyFor()}` }),
    ours: 'event: error\ndata: {"type":"error","code":"upstream_error","message":"Upstream provider error","param":null,"sequence_number":0}\n\n',
  },
];

for (const { endpoint, path, first, error, send, ours } of nativeErrorEvents) {
  test.serial(`${endpoint}: an upstream's error event mid-stream ends the stream with the gateway's own, none of the upstream's words`, async (t) => {
    upstream.answer(path, replyEvents(Readable.from([first, error])));
    const reported = gateway.reported.length;
    const response = await send();
    t.is(response.status, 200);
    const requestId = response.headers.get('request-id') ?? '';
    t.is(await response.text(), `${asClient(first)}${ours.replace('REQUEST_ID', requestId)}`);
    const err = gateway.reported[reported];
    t.true(err instanceof GatewayError && err.status === 502, 'reported on app.on("error")');
    t.false(JSON.stringify({ cause: String((err as GatewayError).cause) }).includes('10.9.9.9'), 'the log line gets the error type, not the message');
  });

  test.serial(`${endpoint}: an upstream's error event before any other is a failure before the answer: 502, none of the upstream's words`, async (t) => {
    upstream.answer(path, replyEvents(Readable.from([error])));
    const response = await send();
    t.is(response.status, 502);
    const text = await response.text();
    t.true(text.includes('Upstream provider error'));
    t.false(text.includes('10.9.9.9'));
  });
}

test.serial('messages: an upstream going silent mid-stream ends the stream with an Anthropic error event (timeout)', async (t) => {
  const body = new PassThrough();
  upstream.answer('/v1/messages', replyEvents(body));
  body.write(sseAnthropic[0] ?? '');
  const response = await impatient.post(
    '/v1/messages',
    { model: 'claude-test', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'hi' }] },
    { 'x-api-key': await impatient.keyFor() },
  );
  t.is(response.status, 200);
  const requestId = response.headers.get('request-id');
  t.is(
    await response.text(),
    `${asClient(sseAnthropic[0] ?? '')}event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'api_error', message: 'Upstream provider timed out' }, request_id: requestId })}\n\n`,
  );
  body.destroy();
});

test.serial('a streaming request answered by a failure before any event gets an ordinary error response', async (t) => {
  upstream.answer(
    '/v1/chat/completions',
    reply(429, { error: { message: 'Rate limit reached for requests', type: 'requests', code: 'rate_limit_exceeded' } }, { 'retry-after': '7' }),
  );
  const response = await chat(await gateway.keyFor(), { model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  t.is(response.status, 429);
  t.is(response.headers.get('retry-after'), '7');
  t.deepEqual(await response.json(), {
    error: { message: 'Rate limit reached for requests', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' },
  });
});

test.serial('a streaming request answered with JSON instead of events is 502', async (t) => {
  upstream.answer('/v1/messages', reply(200, anthropicAnswer));
  const response = await messages(await gateway.keyFor(), { model: 'claude-test', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'hi' }] });
  t.is(response.status, 502);
  t.like(await response.json(), { type: 'error', error: { type: 'api_error', message: 'Upstream provider error' } });
});

const chatBody = { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] };
const messagesBody = { model: 'claude-test', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] };
const upstreamError = { status: 502, body: { error: { message: 'Upstream provider error', type: 'server_error', param: null, code: 'upstream_error' } } };
const upstreamErrorB = { status: 502, body: { type: 'error', error: { type: 'api_error', message: 'Upstream provider error' } } };

const failures: Array<[string, UpstreamAnswer]> = [
  ['the connection dropped without an answer', (res) => res.socket?.destroy()],
  ['a 500', reply(500, { error: { message: `internal failure at 10.1.2.3 for ${OPENAI_PROVIDER_KEY}` } })],
  ['a 503', reply(503, 'Service Unavailable', { 'content-type': 'text/plain' })],
  ['a 401 for the provider key', reply(401, { error: { message: 'Incorrect API key provided: sk-pro***', code: 'invalid_api_key' } })],
  ['a 404 for the upstream model', reply(404, { error: { message: 'The model does not exist', code: 'model_not_found' } })],
  ['a body that is not JSON', reply(200, '<html>gateway page</html>', { 'content-type': 'text/html' })],
  ['JSON that is not an object', reply(200, '[1,2]')],
];

for (const [name, answer] of failures) {
  test.serial(`upstream failure, ${name}: 502 in each shape, naming no address, key or upstream body`, async (t) => {
    const key = await gateway.keyFor();
    upstream.answer('/v1/chat/completions', answer);
    const openAI = await chat(key, chatBody);
    const text = await openAI.text();
    t.deepEqual({ status: openAI.status, body: JSON.parse(text) as unknown }, upstreamError);
    upstream.answer('/v1/messages', answer);
    const anthropic = await messages(key, messagesBody);
    const body = (await anthropic.json()) as { request_id?: string };
    t.deepEqual(
      { status: anthropic.status, body: { ...body, request_id: undefined } },
      { ...upstreamErrorB, body: { ...upstreamErrorB.body, request_id: undefined } },
    );
    t.is(body.request_id, anthropic.headers.get('request-id') ?? '');
  });
}

test.serial('an upstream that does not answer within timeoutMs is 504 in each shape', async (t) => {
  const key = await impatient.keyFor();
  // It never answers.
  upstream.answer('/v1/chat/completions', () => undefined);
  const openAI = await impatient.post('/v1/chat/completions', chatBody, { authorization: `Bearer ${key}` });
  t.is(openAI.status, 504);
  t.deepEqual(await openAI.json(), { error: { message: 'Upstream provider timed out', type: 'server_error', param: null, code: 'upstream_timeout' } });
  upstream.answer('/v1/messages', () => undefined);
  const anthropic = await impatient.post('/v1/messages', messagesBody, { 'x-api-key': key });
  t.is(anthropic.status, 504);
  t.like(await anthropic.json(), { type: 'error', error: { type: 'api_error', message: 'Upstream provider timed out' } });
});

test.serial('upstream refusals (400, 413, 422, 429) keep their status and message, in our shape', async (t) => {
  const key = await gateway.keyFor();
  upstream.answer(
    '/v1/chat/completions',
    reply(400, {
      error: {
        message: "This model's maximum context length is 128000 tokens.",
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    }),
  );
  const refused = await chat(key, chatBody);
  t.is(refused.status, 400);
  t.deepEqual(await refused.json(), {
    error: { message: "This model's maximum context length is 128000 tokens.", type: 'invalid_request_error', param: null, code: 'context_length_exceeded' },
  });

  upstream.answer('/v1/chat/completions', reply(422, 'Unprocessable', { 'content-type': 'text/plain' }));
  const unprocessable = await chat(key, chatBody);
  t.is(unprocessable.status, 422);
  t.deepEqual(await unprocessable.json(), {
    error: { message: 'The upstream provider refused the request', type: 'invalid_request_error', param: null, code: 'upstream_error' },
  });

  upstream.answer(
    '/v1/messages',
    reply(413, { type: 'error', error: { type: 'request_too_large', message: 'Request exceeds the maximum allowed number of bytes.' } }),
  );
  const tooLarge = await messages(key, messagesBody);
  t.is(tooLarge.status, 413);
  t.like(await tooLarge.json(), { type: 'error', error: { type: 'request_too_large', message: 'Request exceeds the maximum allowed number of bytes.' } });

  upstream.answer(
    '/v1/messages',
    reply(
      429,
      { type: 'error', error: { type: 'rate_limit_error', message: 'Number of request tokens has exceeded your per-minute rate limit' } },
      { 'retry-after': '30' },
    ),
  );
  const limited = await messages(key, messagesBody);
  t.is(limited.status, 429);
  t.is(limited.headers.get('retry-after'), '30');
  t.like(await limited.json(), {
    type: 'error',
    error: { type: 'rate_limit_error', message: 'Number of request tokens has exceeded your per-minute rate limit' },
  });
});

// Through redirectGateway: upstreams that answer with a redirect.
for (const status of statuses) {
  test.serial(`an upstream answering ${status} is 502: the request, its PDF and the provider key never follow it`, async (t) => {
    const key = await redirectGateway.keyFor();
    const chat = await redirectGateway.post(
      '/v1/chat/completions',
      { model: `gpt-${status}`, messages: [{ role: 'user', content: 'hi' }] },
      { authorization: `Bearer ${key}` },
    );
    t.is(chat.status, 502);
    t.deepEqual(await chat.json(), { error: { message: 'Upstream provider error', type: 'server_error', param: null, code: 'upstream_error' } });
    const messages = await redirectGateway.post(
      '/v1/messages',
      { model: `claude-${status}`, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
      { 'x-api-key': key },
    );
    t.is(messages.status, 502);
    t.like(await messages.json(), { type: 'error', error: { type: 'api_error', message: 'Upstream provider error' } });
    t.deepEqual(elsewhereSaw, []);
    const [reported] = redirectGateway.reported.slice(-1) as Array<{ cause?: unknown }>;
    t.is(reported?.cause, `provider 'anthropic-${status}' answered HTTP ${status}`, 'the log says what happened');
  });
}

// Through streamingGateway: an upstream that answers as the test writes, and a closed port.
for (const [path, model] of [
  ['/v1/chat/completions', 'gpt-test'],
  ['/v1/messages', 'claude-test'],
] as const) {
  test.serial(`${path}: a client that goes away mid-stream aborts the upstream request`, async (t) => {
    t.timeout(15_000, 'the upstream request was never aborted');
    const key = await streamingGateway.keyFor();
    const client = request(`${streamingGateway.url}${path}`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' } });
    client.end(JSON.stringify({ model, max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'hi' }] }));
    // The answer's status and headers go with its first event.
    const responded = once(client, 'response');
    const { req, res } = await streaming.next();
    const upstreamClosed = once(res, 'close');
    res.write('data: {"n":1}\n\n');
    const [response] = (await responded) as [IncomingMessage];
    const [first] = (await once(response, 'data')) as [Buffer];
    t.is(first.toString(), 'data: {"n":1}\n\n');
    t.false(req.destroyed);
    client.destroy();
    // Resolves only when the gateway has closed its connection to the upstream.
    await upstreamClosed;
    t.false(res.writableFinished, 'the upstream never finished its answer');
  });
}

test.serial('a client that goes away before the upstream answers aborts the upstream request too', async (t) => {
  t.timeout(15_000, 'the upstream request was never aborted');
  const key = await streamingGateway.keyFor();
  const client = request(`${streamingGateway.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}` } });
  client.on('error', () => undefined);
  client.end(JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }));
  const { res } = await streaming.next();
  const upstreamClosed = once(res, 'close');
  client.destroy();
  await upstreamClosed;
  t.pass();
});

test.serial('an upstream where nothing listens is 502, naming no address', async (t) => {
  const before = streamingGateway.reported.length;
  const response = await streamingGateway.post(
    '/v1/chat/completions',
    { model: 'gone-test', messages: [{ role: 'user', content: 'hi' }] },
    { authorization: `Bearer ${await streamingGateway.keyFor()}` },
  );
  t.is(response.status, 502);
  t.deepEqual(await response.json(), { error: { message: 'Upstream provider error', type: 'server_error', param: null, code: 'upstream_error' } });
  // The test before ends with a client gone, which may be reported after this call's error: look among all since.
  const causes = async () => streamingGateway.reported.slice(before).map((err) => (err as { cause?: { code?: string } }).cause?.code);
  t.true((await until(causes, (codes) => codes.includes('ECONNREFUSED'))).includes('ECONNREFUSED'), 'the cause reaches the log');
});

test.serial("a provider's close() ends its keep-alive connections to the upstream", async (t) => {
  const server = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const sockets: Socket[] = [];
  server.on('connection', (socket: Socket) => sockets.push(socket));
  const provider = openAIProvider({ id: 'closing', baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` });
  const answer = await provider.chatCompletions?.({ body: { model: 'm' }, headers: {}, signal: new AbortController().signal });
  t.is((answer as ProviderAnswer | undefined)?.statusCode, 200);
  for await (const chunk of (answer as ProviderAnswer).body) t.truthy(chunk);
  t.is(sockets.length, 1);
  t.false(sockets[0]?.destroyed, 'kept alive for the next call');
  const socketClosed = once(sockets[0] as Socket, 'close');
  await provider.close?.();
  await socketClosed;
  await new Promise((resolve) => server.close(resolve));
});

test('bytes that came while this process stalled past its bounds are read before the bounds decide: no silence, and an answer whole in time', async (t) => {
  const [near, far] = await loopbackPair(t);
  const talking = new UpstreamCall('openai', 50, undefined, { answerMs: 60_000 });
  const answering = new UpstreamCall('openai', 60_000, undefined, { answerMs: 50 });
  t.teardown(() => talking.end());
  near.on('data', () => {
    talking.touch();
    answering.end();
  });
  far.write('answer');
  // The process stalls past both bounds, as on a loaded machine, with the bytes already there.
  const stalledUntil = Date.now() + 200;
  while (Date.now() < stalledUntil);
  await setTimeout(50);
  t.false(talking.timedOut, 'a sign of life read after the stall');
  t.false(answering.timedOut, 'an answer read whole after the stall');
  // Nothing came: the bounds hold.
  const silent = new UpstreamCall('openai', 50);
  const late = new UpstreamCall('openai', 60_000, undefined, { answerMs: 50 });
  await Promise.all([once(silent.signal, 'abort'), once(late.signal, 'abort')]);
  t.true(silent.timedOut && late.timedOut);
  late.end();
});
