import { once } from 'node:events';
import { PassThrough, Readable } from 'node:stream';
import test, { type ExecutionContext } from 'ava';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import type { Provider, ProviderRequest } from '../../lib/models/provider.js';
import { anthropicProvider } from '../../lib/models/providers/anthropic/index.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { MemoryModelLimiter } from '../../lib/stores/memory/model-limiter.js';
import { testClock } from '../../lib/testing/creation-limiter-contract.js';
import { modelsApp, catalogProviders, type ModelsApp } from '../helpers/models-app.js';
import { anthropicMessage, mockProviders, reply, replyEvents, scriptedUpstream, streamingUpstream } from '../helpers/models-upstream.js';
import { until } from '../helpers/poll.js';

// Translated calls through the lib's models router, against a scripted upstream: upstream errors
// in the client's shape and status, refusals before anything is sent, and the usage record of a
// translated call counted as a native one's. The tests share the upstream: they run serially.

const upstream = await scriptedUpstream();
const records: UsageRecord[] = [];
// Request limits count the minutes of a clock that stands still: no test straddles two.
const modelLimiter = new MemoryModelLimiter({ nowMs: testClock('2030-01-15T12:00:30.000Z').nowMs });
const gateway = await modelsApp({
  timeoutMs: 20_000,
  providers: catalogProviders(upstream.url),
  modelLimiter,
  usageRecorder: { record: (record) => records.push(record) },
});
test.after.always(() => Promise.all([gateway.close(), upstream.close()]));
test.beforeEach(() => {
  upstream.received.splice(0);
  records.splice(0);
});

const key = await gateway.keyFor();
const chat = (body: Record<string, unknown>) =>
  gateway.post('/v1/chat/completions', { model: 'claude-test', messages: [{ role: 'user', content: 'hi' }], ...body }, { authorization: `Bearer ${key}` });
const messages = (body: Record<string, unknown>) =>
  gateway.post('/v1/messages', { model: 'gpt-test', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], ...body }, { 'x-api-key': key });
const responses = (body: Record<string, unknown>) =>
  gateway.post('/v1/responses', { model: 'claude-test', input: 'hi', ...body }, { authorization: `Bearer ${key}` });

test.serial("an Anthropic 529 overloaded_error reaches a Chat Completions client as a native call's upstream failure does: 502 upstream_error", async (t) => {
  upstream.answer('/v1/messages', reply(529, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
  const translated = await chat({});
  upstream.answer('/v1/chat/completions', reply(529, { error: { message: 'Overloaded', type: 'server_error' } }));
  const native = await chat({ model: 'gpt-test' });
  t.deepEqual([translated.status, native.status], [502, 502]);
  const body = { error: { message: 'Upstream provider error', type: 'server_error', param: null, code: 'upstream_error' } };
  t.deepEqual([await translated.json(), await native.json()], [body, body]);
});

test.serial("an OpenAI 503 reaches a Messages client as a native call's upstream failure does: 502 api_error", async (t) => {
  upstream.answer('/v1/chat/completions', reply(503, { error: { message: 'The engine is currently overloaded', type: 'server_error' } }));
  const translated = await messages({});
  upstream.answer('/v1/messages', reply(503, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
  const native = await messages({ model: 'claude-test' });
  t.deepEqual([translated.status, native.status], [502, 502]);
  const error = { type: 'api_error', message: 'Upstream provider error' };
  t.like(await translated.json(), { type: 'error', error });
  t.like(await native.json(), { type: 'error', error });
});

test.serial("an upstream refusal keeps its status and message in the client's shape; a 429 its retry-after", async (t) => {
  upstream.answer(
    '/v1/messages',
    reply(400, { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum' } }),
  );
  const refused = await chat({});
  t.is(refused.status, 400);
  t.like(await refused.json(), { error: { message: 'prompt is too long: 210000 tokens > 200000 maximum', type: 'invalid_request_error' } });
  upstream.answer(
    '/v1/chat/completions',
    reply(429, { error: { message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded' } }, { 'retry-after': '7' }),
  );
  const limited = await messages({});
  t.is(limited.status, 429);
  t.is(limited.headers.get('retry-after'), '7');
  t.like(await limited.json(), { type: 'error', error: { type: 'rate_limit_error', message: 'Rate limit reached' } });
});

test.serial("an Anthropic error event mid-stream ends a Chat Completions client's stream with an error chunk", async (t) => {
  const events = [
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}\n\n',
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}\n\n',
    'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded at 10.9.9.9"}}\n\n',
  ];
  upstream.answer('/v1/messages', replyEvents(Readable.from(events)));
  const reported = gateway.reported.length;
  const response = await chat({ stream: true });
  t.is(response.status, 200);
  const text = await response.text();
  t.true(text.includes('"content":"Hel"'));
  t.true(text.trimEnd().endsWith('data: {"error":{"message":"Upstream provider error","type":"server_error","param":null,"code":"upstream_error"}}'));
  // The log gets the event's error type, never the upstream's message.
  t.is((gateway.reported[reported] as { cause?: unknown }).cause, "the upstream's stream failed: overloaded_error");
});

test.serial('a translated stream the upstream ends before its finish ends with an error event, never as a whole one', async (t) => {
  upstream.answer(
    '/v1/messages',
    replyEvents(
      Readable.from([
        'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}\n\n',
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}\n\n',
      ]),
    ),
  );
  const chatText = await (await chat({ stream: true })).text();
  t.true(chatText.includes('"content":"Hel"'));
  t.false(chatText.includes('[DONE]'));
  t.true(chatText.trimEnd().endsWith('data: {"error":{"message":"Upstream provider error","type":"server_error","param":null,"code":"upstream_error"}}'));

  upstream.answer(
    '/v1/chat/completions',
    replyEvents(
      Readable.from([
        'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}\n\n',
      ]),
    ),
  );
  const messagesText = await (await messages({ stream: true })).text();
  t.true(messagesText.includes('"text":"Hel"'));
  t.false(messagesText.includes('message_stop'));
  t.regex(messagesText, /event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"Upstream provider error"\}/);
});

test.serial('a translated stream with no event the reader understands is a 502 before the answer', async (t) => {
  upstream.answer('/v1/chat/completions', replyEvents(Readable.from(['data: {"id": "x", not json\n\n'])));
  const response = await messages({ stream: true });
  t.is(response.status, 502);
  t.like(await response.json(), { type: 'error', error: { type: 'api_error', message: 'Upstream provider error' } });
});

const MESSAGE_START =
  'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}\n\n';
const MESSAGE_STOP = 'event: message_stop\ndata: {"type":"message_stop"}\n\n';

test.serial('a translated stream whose events cannot be read is a failure, never a successful empty answer', async (t) => {
  // Events whose data is not JSON, or JSON not of the format's shape, before one the reader finishes on.
  const unreadable = [
    ['event: message_start\ndata: {"type": message_start, not json\n\n', MESSAGE_STOP],
    ['event: message_start\ndata: ["message_start"]\n\n', MESSAGE_STOP],
    ['event: message_start\ndata: {"type":"message_start"}\n\n', MESSAGE_STOP],
    [MESSAGE_STOP],
  ];
  for (const events of unreadable) {
    upstream.answer('/v1/messages', replyEvents(Readable.from(events)));
    const response = await chat({ stream: true });
    t.is(response.status, 502, events[0]);
    t.like(await response.json(), { error: { code: 'upstream_error' } });
  }
  // After the first event reached the client: its stream ends with the format's error event.
  const text = 'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hel"}}\n\n';
  upstream.answer('/v1/messages', replyEvents(Readable.from([MESSAGE_START, text, 'event: content_block_delta\ndata: lo, not json\n\n', MESSAGE_STOP])));
  const chatText = await (await chat({ stream: true })).text();
  t.true(chatText.includes('"content":"Hel"'));
  t.false(chatText.includes('"finish_reason":"stop"'));
  t.true(chatText.trimEnd().endsWith('data: {"error":{"message":"Upstream provider error","type":"server_error","param":null,"code":"upstream_error"}}'));

  const chunk =
    'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}\n\n';
  const finish = 'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n';
  upstream.answer(
    '/v1/chat/completions',
    replyEvents(Readable.from([chunk, 'data: {"id":"c1","object":"chat.completion.chunk"}\n\n', finish, 'data: [DONE]\n\n'])),
  );
  const messagesText = await (await messages({ stream: true })).text();
  t.true(messagesText.includes('"text":"Hel"'));
  t.false(messagesText.includes('message_stop'));
  t.regex(messagesText, /event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"Upstream provider error"\}/);
});

test.serial('a translated call that failed before its first event reached the client is charged nothing', async (t) => {
  // The upstream told its input, then failed: the client got a 502 and no answer.
  upstream.answer(
    '/v1/messages',
    replyEvents(Readable.from([`${MESSAGE_START}event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n`])),
  );
  t.is((await chat({ stream: true })).status, 502);
  await until(
    async () => records.length,
    (count) => count === 1,
  );
  t.like(records[0], { status: 502, inputTokens: 0, outputTokens: 0, costPicoUsd: 0 });
});

test.serial("a translated stream the upstream cuts after its first event is charged the input the provider told, not the request's estimate", async (t) => {
  const text = 'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hel"}}\n\n';
  upstream.answer('/v1/messages', replyEvents(Readable.from([MESSAGE_START, text])));
  // About a hundred tokens estimated from the request; the provider counted 10.
  const response = await chat({ stream: true, messages: [{ role: 'user', content: 'word '.repeat(80) }] });
  t.regex(await response.text(), /"code":"upstream_error"/);
  await until(
    async () => records.length,
    (count) => count === 1,
  );
  t.like(records[0], { inputTokens: 10, outputTokens: 1 });
});

const refusals: Array<[string, () => Promise<Response>, string]> = [
  ['logprobs to an Anthropic model', () => chat({ logprobs: true }), 'logprobs'],
  ['n: 2 to an Anthropic model', () => chat({ n: 2 }), 'n'],
  ['seed to an Anthropic model', () => chat({ seed: 7 }), 'seed'],
  [
    'JSON mode without a schema (response_format json_object) to an Anthropic model',
    () => chat({ response_format: { type: 'json_object' } }),
    'response_format json_object',
  ],
  ['a temperature above 1 to an Anthropic model', () => chat({ temperature: 1.5 }), 'temperature above 1'],
  [
    'an image detail to an Anthropic model',
    () => chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png', detail: 'low' } }] }] }),
    'messages[0].content[0].image_url.detail',
  ],
  [
    'audio input to an Anthropic model',
    () => chat({ messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] }] }),
    'messages[0].content[0].type',
  ],
  ['a service tier Anthropic does not have', () => chat({ service_tier: 'flex' }), 'service_tier flex'],
  ['top_k to an OpenAI model', () => messages({ top_k: 5 }), 'top_k'],
  ["Anthropic's web search tool to an OpenAI model", () => messages({ tools: [{ type: 'web_search_20250305', name: 'web_search' }] }), 'tools[0].type'],
  [
    'a document with citations to an OpenAI model',
    () =>
      messages({
        messages: [
          {
            role: 'user',
            content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' }, citations: { enabled: true } }],
          },
        ],
      }),
    'messages[0].content[0].citations',
  ],
  ['previous_response_id to an Anthropic model', () => responses({ previous_response_id: 'resp_1' }), 'previous_response_id'],
  // What Anthropic's thinking refuses beside it, named as the client sent it.
  [
    'a temperature with reasoning to an Anthropic model (it thinks at temperature 1 only)',
    () => responses({ reasoning: { effort: 'low' }, temperature: 0.2 }),
    'temperature',
  ],
  ['a top_p below 0.95 with reasoning to an Anthropic model', () => responses({ reasoning: { effort: 'low' }, top_p: 0.5 }), 'top_p'],
  [
    'a forced tool with reasoning to an Anthropic model',
    () =>
      responses({
        reasoning: { effort: 'low' },
        tools: [{ type: 'function', name: 'f', parameters: { type: 'object', properties: {} } }],
        tool_choice: 'required',
      }),
    'tool_choice',
  ],
  [
    'max_output_tokens that leave reasoning under 1024 tokens, to an Anthropic model',
    () => responses({ reasoning: { effort: 'low' }, max_output_tokens: 1000 }),
    'max_output_tokens',
  ],
  ["OpenAI's web search tool to an Anthropic model", () => responses({ tools: [{ type: 'web_search' }] }), 'tools[0].type'],
  [
    'JSON mode without a schema (text.format json_object) to an Anthropic model',
    () => responses({ text: { format: { type: 'json_object' } } }),
    'text.format json_object',
  ],
  [
    'an anthropic-beta whose feature is not translated, to an OpenAI model',
    () =>
      gateway.post(
        '/v1/messages',
        { model: 'gpt-test', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] },
        { 'x-api-key': key, 'anthropic-beta': 'files-api-2025-04-14, code-execution-2025-08-25' },
      ),
    'anthropic-beta: code-execution-2025-08-25',
  ],
  [
    'an anthropic-beta whose feature is not translated, to count the tokens of an OpenAI model',
    () =>
      gateway.post(
        '/v1/messages/count_tokens',
        { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] },
        { 'x-api-key': key, 'anthropic-beta': 'context-management-2025-06-27' },
      ),
    'anthropic-beta: context-management-2025-06-27',
  ],
];
for (const [name, send, param] of refusals) {
  test.serial(`refused before anything is sent, naming the parameter: ${name}`, async (t) => {
    const response = await send();
    t.is(response.status, 400);
    const body = (await response.json()) as { error: { message: string } };
    t.true(body.error.message.startsWith(`'${param}' cannot be sent to this model`), body.error.message);
    t.is(upstream.received.length, 0);
  });
}

test.serial('a token limit that is not a positive integer is the same 400, translated or native, in either format, nothing sent', async (t) => {
  for (const value of [-1, 0, 10.5, 1e20]) {
    const answers = [
      await chat({ max_tokens: value }),
      await chat({ model: 'gpt-test', max_tokens: value }),
      await chat({ max_completion_tokens: value }),
      await messages({ max_tokens: value }),
      await messages({ model: 'claude-test', max_tokens: value }),
      await responses({ max_output_tokens: value }),
    ];
    t.deepEqual(
      answers.map((answer) => answer.status),
      [400, 400, 400, 400, 400, 400],
      String(value),
    );
    const [translated, native, completion, messagesTranslated, messagesNative, output] = (await Promise.all(answers.map((answer) => answer.json()))) as Array<{
      error: { message: string };
    }>;
    t.deepEqual(translated, native);
    t.is(translated?.error.message, "'max_tokens' must be a positive integer");
    t.is(completion?.error.message, "'max_completion_tokens' must be a positive integer");
    t.deepEqual(messagesTranslated?.error, messagesNative?.error);
    t.is(messagesNative?.error.message, "'max_tokens' must be a positive integer");
    t.is(output?.error.message, "'max_output_tokens' must be a positive integer");
  }
  t.is(upstream.received.length, 0);
});

test.serial(
  'a translated call is refused, as the APIs refuse it, a parallel_tool_calls that is not a boolean and a tool choice that demands a call without tools',
  async (t) => {
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }];
    const refused: Array<[() => Promise<Response>, string]> = [
      [() => chat({ tools, parallel_tool_calls: 'no' }), "'parallel_tool_calls' must be a boolean"],
      [() => responses({ parallel_tool_calls: 'no' }), "'parallel_tool_calls' must be a boolean"],
      [() => chat({ tool_choice: 'required' }), "'tool_choice' requires 'tools'"],
      [() => chat({ tool_choice: { type: 'function', function: { name: 'f' } } }), "'tool_choice' requires 'tools'"],
      [() => responses({ tool_choice: 'required' }), "'tool_choice' requires 'tools'"],
      [() => messages({ tool_choice: { type: 'any' } }), "'tool_choice' requires 'tools'"],
      [() => messages({ tool_choice: { type: 'tool', name: 'f' } }), "'tool_choice' requires 'tools'"],
      [
        () => messages({ tools: [{ name: 'f', input_schema: { type: 'object' } }], tool_choice: { type: 'auto', disable_parallel_tool_use: 'no' } }),
        "'tool_choice.disable_parallel_tool_use' must be a boolean",
      ],
    ];
    for (const [send, message] of refused) {
      const response = await send();
      t.is(response.status, 400, message);
      const body = (await response.json()) as { error: { message: string } };
      t.is(body.error.message, message);
    }
    t.is(upstream.received.length, 0);
  },
);

test.serial('stream_options without stream is a 400 naming it, as OpenAI answers it', async (t) => {
  const response = await chat({ stream_options: { include_usage: true } });
  t.is(response.status, 400);
  t.like(await response.json(), { error: { type: 'invalid_request_error', message: "'stream_options' is only allowed when 'stream' is true" } });
  t.is(upstream.received.length, 0);
});

test.serial('a Messages field of the wrong type is a 400 naming it, never taken as absent', async (t) => {
  for (const [body, message] of [
    [{ metadata: 'u' }, "'metadata' must be an object"],
    [
      { messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 5 }] }] },
      "'messages[0].content[0].content' must be a string or an array",
    ],
  ] as const) {
    const response = await messages(body);
    t.is(response.status, 400);
    t.like(await response.json(), { type: 'error', error: { type: 'invalid_request_error', message } });
  }
  t.is(upstream.received.length, 0);
});

test.serial("an effort's thinking budget is lowered below the client's max tokens, which Anthropic requires", async (t) => {
  upstream.answer('/v1/messages', reply(200, anthropicMessage('Thought.')));
  t.is((await responses({ reasoning: { effort: 'high' }, max_output_tokens: 4000 })).status, 200);
  t.like(upstream.received[0]?.body, { max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 3999 } });
  upstream.answer('/v1/messages', reply(200, anthropicMessage('Thought.')));
  t.is((await responses({ reasoning: { effort: 'low' }, temperature: 1 })).status, 200);
  t.like(upstream.received[1]?.body, { max_tokens: 4096 + 2048, temperature: 1, thinking: { type: 'enabled', budget_tokens: 2048 } });
});

test.serial('to an OpenAI model, betas that only enable what is translated pass, and cache_control hints are left out, named', async (t) => {
  upstream.answer(
    '/v1/chat/completions',
    reply(200, {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1,
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hi.' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 9, completion_tokens: 2 },
    }),
  );
  const cached = { cache_control: { type: 'ephemeral' } };
  const response = await gateway.post(
    '/v1/messages',
    {
      model: 'gpt-test',
      max_tokens: 10,
      system: [{ type: 'text', text: 'Be brief.', ...cached }],
      tools: [{ name: 'f', input_schema: { type: 'object' }, ...cached }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi', ...cached }] }],
    },
    { 'x-api-key': key, 'anthropic-beta': 'files-api-2025-04-14,prompt-caching-2024-07-31' },
  );
  t.is(response.status, 200);
  t.is(response.headers.get('x-kmg-omitted'), 'cache_control');
  const sent = upstream.received[0];
  t.is(sent?.headers['anthropic-beta'], undefined);
  t.false(JSON.stringify(sent?.body).includes('cache_control'));
});

test.serial('a translated call is metered as a native one: its usage record has the tokens of the answer, streamed or not', async (t) => {
  upstream.answer('/v1/messages', reply(200, { ...anthropicMessage('Hi there.'), usage: { input_tokens: 10, cache_read_input_tokens: 5, output_tokens: 4 } }));
  t.is((await chat({})).status, 200);
  const events = [
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8,"output_tokens":1}}}\n\n',
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n',
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}\n\n',
    'event: message_stop\ndata: {"type":"message_stop"}\n\n',
  ];
  upstream.answer('/v1/messages', replyEvents(Readable.from(events)));
  const streamed = await chat({ stream: true });
  const text = await streamed.text();
  // The client did not ask for usage: the usage chunk is withheld from it, as from a native stream.
  t.false(text.includes('"usage"'));
  await until(
    async () => records.length,
    (count) => count === 2,
  );
  t.like(records[0], { model: 'claude-test', provider: 'anthropic', status: 200, stream: false, inputTokens: 15, outputTokens: 4 });
  t.like(records[1], { model: 'claude-test', provider: 'anthropic', status: 200, stream: true, inputTokens: 8, outputTokens: 3 });
});

test.serial("a translated call carries the key's rate-limit headers in the client's style", async (t) => {
  const limited = await gateway.keyFor(undefined, { limits: { requestsPerMinute: 50 } });
  upstream.answer('/v1/messages', reply(200, anthropicMessage('Hi.')));
  const openAIStyle = await gateway.post(
    '/v1/chat/completions',
    { model: 'claude-test', messages: [{ role: 'user', content: 'hi' }] },
    { authorization: `Bearer ${limited}` },
  );
  t.is(openAIStyle.status, 200);
  t.is(openAIStyle.headers.get('x-ratelimit-limit-requests'), '50');
  t.is(openAIStyle.headers.get('anthropic-ratelimit-requests-limit'), null);
  upstream.answer(
    '/v1/chat/completions',
    reply(200, {
      id: 'c',
      object: 'chat.completion',
      created: 1,
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hi.' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 1 },
    }),
  );
  const anthropicStyle = await gateway.post(
    '/v1/messages',
    { model: 'gpt-test', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
    { 'x-api-key': limited },
  );
  t.is(anthropicStyle.status, 200);
  t.is(anthropicStyle.headers.get('anthropic-ratelimit-requests-limit'), '50');
  t.is(anthropicStyle.headers.get('x-ratelimit-limit-requests'), null);
});

test.serial("a refused translation spends none of the key's limits", async (t) => {
  const once1 = await gateway.keyFor(undefined, { limits: { requestsPerMinute: 1 } });
  const send = (body: Record<string, unknown>) =>
    gateway.post('/v1/chat/completions', { model: 'claude-test', messages: [{ role: 'user', content: 'hi' }], ...body }, { authorization: `Bearer ${once1}` });
  t.is((await send({ logprobs: true })).status, 400);
  upstream.answer('/v1/messages', reply(200, anthropicMessage('Hi.')));
  t.is((await send({})).status, 200);
  t.is((await send({})).status, 429);
});

/**
 * The models app on a mock upstream with an OpenAI provider of each API alone (`responses-model`,
 * `chat-model`) and an Anthropic one (`claude`), closed when the test ends.
 */
async function oneApiEach(t: ExecutionContext) {
  const mock = await mockProviders();
  const app = await modelsApp({
    providers: [
      openAIProvider({ id: 'responses-only', baseURL: `${mock.url}/v1`, endpoints: ['responses'] }),
      openAIProvider({ id: 'chat-only', baseURL: `${mock.url}/v1`, endpoints: ['chat.completions'] }),
      anthropicProvider({ id: 'anthropic', baseURL: mock.url }),
    ],
    catalog: [
      { id: 'responses-model', provider: 'responses-only' },
      { id: 'chat-model', provider: 'chat-only' },
      { id: 'claude', provider: 'anthropic' },
    ],
  });
  t.teardown(() => Promise.all([app.close(), mock.close()]));
  return { mock, app };
}

test.serial(
  "OpenAI's shared fields pass between Chat Completions and Responses as they are; to Messages the end user is carried and the hints left out, named",
  async (t) => {
    const { mock, app } = await oneApiEach(t);
    const auth = { authorization: `Bearer ${await app.keyFor()}` };
    const shared = {
      metadata: { team: 'search' },
      service_tier: 'flex',
      prompt_cache_key: 'tenant-7',
      prompt_cache_retention: '24h',
      safety_identifier: 'user-42',
    };
    const hi = [{ role: 'user', content: 'hi' }];
    t.is((await app.post('/v1/chat/completions', { model: 'responses-model', messages: hi, ...shared }, auth)).status, 200);
    t.is((await app.post('/v1/responses', { model: 'chat-model', input: 'hi', ...shared }, auth)).status, 200);
    t.like(mock.calls[0], { path: '/v1/responses', body: shared });
    t.like(mock.calls[1], { path: '/v1/chat/completions', body: shared });
    const hints = {
      metadata: shared.metadata,
      prompt_cache_key: shared.prompt_cache_key,
      prompt_cache_retention: shared.prompt_cache_retention,
      safety_identifier: shared.safety_identifier,
    };
    for (const [path, body] of [
      ['/v1/chat/completions', { messages: hi }],
      ['/v1/responses', { input: 'hi' }],
    ] as const) {
      const answer = await app.post(path, { model: 'claude', ...body, ...hints, user: 'legacy-id', service_tier: 'default' }, auth);
      t.is(answer.status, 200, path);
      t.is(answer.headers.get('x-kmg-omitted'), 'metadata,prompt_cache_key,prompt_cache_retention,user', path);
      const sent = mock.calls.at(-1)?.body ?? {};
      t.like(sent, { metadata: { user_id: 'user-42' }, service_tier: 'standard_only' }, path);
      t.false(
        ['prompt_cache_key', 'prompt_cache_retention', 'safety_identifier', 'user'].some((field) => field in sent),
        path,
      );
    }
  },
);

test.serial('an output limit below the 16 tokens the Responses API takes is refused by name before a translated call to it is sent', async (t) => {
  const { mock, app } = await oneApiEach(t);
  const key = await app.keyFor();
  const hi = [{ role: 'user', content: 'hi' }];
  const refused = [
    await app.post('/v1/chat/completions', { model: 'responses-model', messages: hi, max_tokens: 15 }, { authorization: `Bearer ${key}` }),
    await app.post('/v1/messages', { model: 'responses-model', messages: hi, max_tokens: 1 }, { 'x-api-key': key }),
  ];
  t.deepEqual(
    refused.map((response) => response.status),
    [400, 400],
  );
  const [chat, messages] = (await Promise.all(refused.map((response) => response.json()))) as Array<{ error: { message: string } }>;
  t.is(chat?.error.message, "'max_tokens' must be at least 16 for this model: its provider speaks Responses, which refuses fewer");
  t.is(messages?.error.message, "'max_tokens' must be at least 16 for this model: its provider speaks Responses, which refuses fewer");
  t.is((await app.post('/v1/chat/completions', { model: 'responses-model', messages: hi, max_tokens: 16 }, { authorization: `Bearer ${key}` })).status, 200);
  t.is(mock.calls.length, 1, 'no refused call was sent');
});

test.serial('a file that is not a PDF is refused by name where the target takes only PDFs, never sent as one', async (t) => {
  const { mock, app } = await oneApiEach(t);
  const key = await app.keyFor();
  const refusedFor = async (response: Response, param: string) => {
    t.is(response.status, 400);
    const { error } = (await response.json()) as { error: { message: string } };
    t.true(error.message.startsWith(`'${param}' cannot be sent to this model`), error.message);
  };
  // Anthropic takes a document as bytes only as a PDF.
  const document = (mediaType: string) => [
    { role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: mediaType, data: 'JVBERi0=' } }] },
  ];
  for (const model of ['chat-model', 'responses-model']) {
    await refusedFor(
      await app.post('/v1/messages', { model, max_tokens: 16, messages: document('text/plain') }, { 'x-api-key': key }),
      'messages[0].content[0].source.media_type',
    );
    t.is((await app.post('/v1/messages', { model, max_tokens: 16, messages: document('application/pdf') }, { 'x-api-key': key })).status, 200, model);
  }
  // Chat Completions reads only PDFs; the Responses API reads text files too.
  const input = [{ role: 'user', content: [{ type: 'input_file', filename: 'notes.txt', file_data: 'data:text/plain;base64,aGk=' }] }];
  await refusedFor(await app.post('/v1/responses', { model: 'chat-model', input }, { authorization: `Bearer ${key}` }), 'input (a text/plain file)');
  t.deepEqual(
    mock.calls.map((call) => call.path),
    ['/v1/chat/completions', '/v1/responses'],
    'only the PDFs were sent',
  );
});

test.serial('max_tokens and max_completion_tokens together are refused, as OpenAI refuses them, rather than one of them dropped', async (t) => {
  const refused = await chat({ max_tokens: 10, max_completion_tokens: 20 });
  t.is(refused.status, 400);
  t.like(await refused.json(), { error: { message: "'max_tokens' and 'max_completion_tokens' cannot both be set", code: 'invalid_request' } });
  t.is(upstream.received.length, 0);
});

test.serial('a refused translation is recorded with the model and provider it was refused for', async (t) => {
  const records: UsageRecord[] = [];
  const app = await modelsApp({ usageRecorder: { record: (record) => records.push(record) } });
  t.teardown(() => app.close());
  const response = await app.post(
    '/v1/chat/completions',
    { model: 'claude-test', messages: [{ role: 'user', content: 'hi' }], logprobs: true },
    { authorization: `Bearer ${await app.keyFor()}` },
  );
  t.is(response.status, 400);
  await until(
    async () => records.length,
    (count) => count === 1,
  );
  t.like(records[0], { status: 400, model: 'claude-test', provider: 'anthropic', attempts: 0, inputTokens: 0 });
});

test.serial('a client that leaves a translated stream: the upstream call is closed and the call recorded as 499 with the usage read so far', async (t) => {
  const hanging = await streamingUpstream();
  const leaving: UsageRecord[] = [];
  const app = await modelsApp({
    providers: [anthropicProvider({ id: 'anthropic', baseURL: hanging.url })],
    catalog: [{ id: 'claude-test', provider: 'anthropic' }],
    usageRecorder: { record: (record) => leaving.push(record) },
  });
  t.teardown(() => Promise.all([app.close(), hanging.close()]));
  const controller = new AbortController();
  // The answer's status and headers go with its first event.
  const answering = app.post(
    '/v1/chat/completions',
    { model: 'claude-test', stream: true, messages: [{ role: 'user', content: 'hi' }] },
    { authorization: `Bearer ${await app.keyFor()}` },
    controller.signal,
  );
  const arrival = await hanging.next();
  arrival.res.write(
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":7,"output_tokens":1}}}\n\n',
  );
  const answer = await answering;
  const reader = (answer.body as ReadableStream<Uint8Array>).getReader();
  t.regex(new TextDecoder().decode((await reader.read()).value), /"model":"claude-test"/);
  const closed = once(arrival.req.socket, 'close');
  controller.abort();
  await closed;
  await until(
    async () => leaving.length,
    (count) => count === 1,
  );
  t.like(leaving[0], { status: 499, stream: true, inputTokens: 7 });
});

/** A Messages provider that answers every call with `body` and never looks at the call's signal. */
function deafProvider(body: () => Readable): Provider & { requests: ProviderRequest[] } {
  const requests: ProviderRequest[] = [];
  return {
    id: 'deaf',
    requests,
    messages: async (request) => (requests.push(request), { statusCode: 200, headers: { 'content-type': 'application/json' }, body: body() }),
  };
}
const chatOn = (app: ModelsApp, appKey: string, signal?: AbortSignal) =>
  app.post('/v1/chat/completions', { model: 'claude-deaf', messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${appKey}` }, signal);

test.serial("a client that leaves a translated JSON call: the provider's answer is destroyed, whether or not the provider heeds the signal", async (t) => {
  const answer = new PassThrough();
  // Half an answer, then nothing more.
  answer.write('{"id":"msg_1","type":"message","role":"assistant"');
  const provider = deafProvider(() => answer);
  const app = await modelsApp({ providers: [provider], catalog: [{ id: 'claude-deaf', provider: 'deaf' }] });
  t.teardown(() => app.close());
  const controller = new AbortController();
  const answering = chatOn(app, await app.keyFor(), controller.signal).catch(() => undefined);
  await until(
    async () => provider.requests.length,
    (count) => count === 1,
  );
  controller.abort();
  await answering;
  t.true(await until(async () => answer.destroyed, Boolean), 'the answer is destroyed');
  t.true(provider.requests[0]?.signal.aborted, 'and the signal aborted, for a provider that reads it');
});

test.serial("a translated JSON answer that fails midway, or is not JSON, is a 502 in the client's shape", async (t) => {
  const bodies = [
    () =>
      Readable.from(
        (async function* () {
          yield '{"id":"msg_1",';
          throw new Error('connection reset');
        })(),
      ),
    () => Readable.from(['<html>gateway page</html>']),
  ];
  for (const body of bodies) {
    const app = await modelsApp({ providers: [deafProvider(body)], catalog: [{ id: 'claude-deaf', provider: 'deaf' }] });
    t.teardown(() => app.close());
    const response = await chatOn(app, await app.keyFor());
    t.is(response.status, 502);
    t.like(await response.json(), { error: { message: 'Upstream provider error', type: 'server_error', code: 'upstream_error' } });
  }
});
