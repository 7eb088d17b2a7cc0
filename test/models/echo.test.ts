import { text } from 'node:stream/consumers';
import anyTest, { type TestFn } from 'ava';
import { errors } from '../../lib/errors/gateway-error.js';
import { eventFields, EventSplitter, withData } from '../../lib/http/server-sent-events.js';
import { openAIErrorEvent } from '../../lib/models/formats/chat-completions/error-event.js';
import { anthropicErrorEvent } from '../../lib/models/formats/messages/error-event.js';
import type { ProviderAnswer } from '../../lib/models/provider.js';
import { echoProvider } from '../../lib/models/providers/echo/index.js';
import { countPdfPages } from '../../lib/models/providers/echo/received.js';
import { exampleOf } from '../../lib/models/providers/echo/tools.js';
import { CATALOG, modelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { checkedFetch } from '../helpers/openapi.js';
import { referenceApp } from '../helpers/reference-app.js';

// The echo provider: its answers in each format, whole and streamed, and its tool calls; the
// model routes' shapes; and the splitting of event streams.

const test = anyTest as TestFn<{ problems: string[]; post: (path: string, body: unknown) => Promise<Response> }>;

// The echo provider over the models routes.
const gateway = await modelsApp();

// A catalog whose ids hold what real ids hold: dots and slashes.
const catalog = [
  ...CATALOG,
  { id: 'acme/llama-3.1-8b', provider: 'local', display_name: 'Llama 3.1 8B', created: 1_744_000_300, max_input_tokens: 128_000, max_tokens: 8192 },
  { id: 'm4', provider: 'local' },
  { id: 'm5', provider: 'local' },
];
const dottedGateway = await modelsApp({ catalog });

// The tool-loop tests call the reference server through t.context.post, and every answer they get
// is checked against docs/openapi.json. The other tests make no such call: their list stays empty.
const referenceGateway = await referenceApp({ models: [{ id: 'echo-1', provider: 'echo' }] });
const referenceKey = await referenceGateway.keyFor();
test.after.always(() => Promise.all([gateway.close(), dottedGateway.close(), referenceGateway.close()]));
test.beforeEach((t) => {
  t.context.problems = [];
  const fetch = checkedFetch(t.context.problems);
  t.context.post = (path, body) =>
    fetch(`${referenceGateway.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${referenceKey}`, 'x-api-key': referenceKey, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
});
test.afterEach((t) => t.deepEqual(t.context.problems, [], 'every answer agrees with docs/openapi.json'));

/** The `data:` payloads of an event stream, with their event names. */
function parseEvents(text: string): Array<{ event: string | undefined; data: string }> {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const lines = block.split('\n');
      return {
        event: lines.find((line) => line.startsWith('event: '))?.slice(7),
        data: lines
          .filter((line) => line.startsWith('data: '))
          .map((line) => line.slice(6))
          .join('\n'),
      };
    });
}

test('countPdfPages counts page objects, not the page tree', (t) => {
  t.is(countPdfPages(makePdf(1)), 1);
  t.is(countPdfPages(makePdf(7)), 7);
  t.is(countPdfPages(Buffer.from('%PDF-1.4\n1 0 obj <</Type/Page>> endobj 2 0 obj <</Type/Pages/Count 1>> endobj')), 1);
  t.is(countPdfPages(Buffer.from('not a pdf')), 0);
});

test('chat completions: echo answers in OpenAI format with each attached document described', async (t) => {
  const key = await gateway.keyFor();
  const pdf = makePdf(3, 1000);
  const fileId = await gateway.storePdf(pdf, { filename: 'quarterly.pdf' });
  const response = await gateway.post(
    '/v1/chat/completions',
    {
      model: 'echo-1',
      messages: [
        { role: 'system', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in this file?' },
            { type: 'file', file: { file_id: fileId } },
          ],
        },
      ],
    },
    { authorization: `Bearer ${key}` },
  );
  t.is(response.status, 200);
  t.regex(response.headers.get('x-request-id') ?? '', /^req_[A-Za-z0-9]{32}$/);
  const body = (await response.json()) as {
    object: string;
    model: string;
    choices: Array<{ message: { role: string; content: string }; finish_reason: string }>;
  };
  t.is(body.object, 'chat.completion');
  t.is(body.model, 'echo-1');
  t.is(body.choices[0]?.message.role, 'assistant');
  t.is(body.choices[0]?.finish_reason, 'stop');
  t.is(
    body.choices[0]?.message.content,
    [
      'Echo from echo-upstream-1: received 2 messages.',
      'The last user message says: "What is in this file?"',
      `Document 1: quarterly.pdf, ${pdf.length} bytes, 3 pages.`,
    ].join('\n'),
  );
});

test('chat completions: the same request gets the same answer', async (t) => {
  const key = await gateway.keyFor();
  const request = { model: 'echo-1', messages: [{ role: 'user', content: 'hello there' }] };
  const first = (await (await gateway.post('/v1/chat/completions', request, { authorization: `Bearer ${key}` })).json()) as Record<string, unknown>;
  const second = (await (await gateway.post('/v1/chat/completions', request, { authorization: `Bearer ${key}` })).json()) as Record<string, unknown>;
  t.deepEqual({ ...first, created: 0 }, { ...second, created: 0 });
  t.like(first, { usage: { prompt_tokens: 2, completion_tokens: 17, total_tokens: 19 } });
});

test('chat completions: echo streams chunks ending in [DONE]', async (t) => {
  const key = await gateway.keyFor();
  const response = await gateway.post(
    '/v1/chat/completions',
    { model: 'echo-1', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] },
    { authorization: `Bearer ${key}` },
  );
  t.is(response.status, 200);
  t.regex(response.headers.get('content-type') ?? '', /^text\/event-stream/);
  t.is(response.headers.get('cache-control'), 'no-cache');
  t.regex(response.headers.get('x-request-id') ?? '', /^req_/);
  const events = parseEvents(await response.text());
  t.is(events.at(-1)?.data, '[DONE]');
  const chunks = events
    .slice(0, -1)
    .map(
      (event) => JSON.parse(event.data) as { object: string; choices: Array<{ delta: { content?: string }; finish_reason: string | null }>; usage?: unknown },
    );
  t.true(chunks.every((chunk) => chunk.object === 'chat.completion.chunk'));
  const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
  t.is(text, 'Echo from echo-upstream-1: received 1 message.\nThe last user message says: "hi"\nNo documents are attached.');
  t.is(chunks.at(-2)?.choices[0]?.finish_reason, 'stop');
  t.like(chunks.at(-1), { choices: [], usage: { prompt_tokens: 1 } });
});

test('messages: echo answers in Anthropic format, titling the document with its stored name', async (t) => {
  const key = await gateway.keyFor();
  const pdf = makePdf(2);
  const fileId = await gateway.storePdf(pdf, { filename: 'contract.pdf' });
  const response = await gateway.post(
    '/v1/messages',
    {
      model: 'echo-1',
      max_tokens: 100,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'document', source: { type: 'file', file_id: fileId } },
            { type: 'text', text: 'Summarise.' },
          ],
        },
      ],
    },
    { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
  );
  t.is(response.status, 200);
  t.regex(response.headers.get('request-id') ?? '', /^req_[A-Za-z0-9]{32}$/);
  const body = (await response.json()) as { type: string; role: string; stop_reason: string; content: Array<{ type: string; text: string }> };
  t.like(body, { type: 'message', role: 'assistant', stop_reason: 'end_turn', model: 'echo-1' });
  t.deepEqual(body.content, [
    {
      type: 'text',
      text: [
        'Echo from echo-upstream-1: received 1 message.',
        'The last user message says: "Summarise."',
        `Document 1: contract.pdf, ${pdf.length} bytes, 2 pages.`,
      ].join('\n'),
    },
  ]);
});

test('messages: echo streams the Anthropic event sequence', async (t) => {
  const key = await gateway.keyFor();
  const response = await gateway.post(
    '/v1/messages',
    { model: 'echo-1', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'hi' }] },
    { 'x-api-key': key },
  );
  t.is(response.status, 200);
  t.regex(response.headers.get('request-id') ?? '', /^req_/);
  const events = parseEvents(await response.text());
  t.deepEqual(
    events.map((event) => event.event),
    [
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ],
  );
  for (const event of events) t.is((JSON.parse(event.data) as { type: string }).type, event.event ?? '');
  const text = events
    .filter((event) => event.event === 'content_block_delta')
    .map((event) => (JSON.parse(event.data) as { delta: { text: string } }).delta.text)
    .join('');
  t.is(text, 'Echo from echo-upstream-1: received 1 message.\nThe last user message says: "hi"\nNo documents are attached.');
});

test('echo, called as a provider, refuses a body without messages as an upstream would: 400 with its message', async (t) => {
  // The gateway refuses such a body before any provider (test/spec/check-order): this is echo alone.
  const echo = echoProvider({ id: 'echo' });
  const request = { body: { model: 'echo-upstream-1' }, headers: {}, signal: new AbortController().signal };
  const answerOf = async (answer: Promise<ProviderAnswer | Response>) => {
    const { statusCode, body } = (await answer) as ProviderAnswer;
    return { statusCode, body: JSON.parse(await text(body)) as unknown };
  };
  t.like(await answerOf(echo.chatCompletions!(request)), {
    statusCode: 400,
    body: { error: { message: "'messages' must be an array", type: 'invalid_request_error' } },
  });
  t.like(await answerOf(echo.messages!(request)), {
    statusCode: 400,
    body: { type: 'error', error: { type: 'invalid_request_error', message: 'messages: Field required' } },
  });
});

test('messages: a document inside a tool_result is resolved too', async (t) => {
  const key = await gateway.keyFor();
  const pdf = makePdf(5);
  const fileId = await gateway.storePdf(pdf, { filename: 'tool-output.pdf' });
  const response = await gateway.post(
    '/v1/messages',
    {
      model: 'echo-1',
      max_tokens: 100,
      messages: [
        { role: 'user', content: 'Fetch the report.' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'fetch', input: {} }] },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'document', source: { type: 'file', file_id: fileId } }] }],
        },
      ],
    },
    { 'x-api-key': key },
  );
  t.is(response.status, 200);
  const body = (await response.json()) as { content: Array<{ text: string }> };
  t.true(body.content[0]?.text.endsWith(`Document 1: tool-output.pdf, ${pdf.length} bytes, 5 pages.`));
});

// The echo provider in a tool loop, on the wire: each format's call, whole and streamed, as the
// real APIs give it; the text answer after a tool result; `tool_choice` none. Every answer is
// checked against docs/openapi.json.

// biome-ignore lint/suspicious/noExplicitAny: the wire's JSON, read field by field
type Json = Record<string, any>;

/** The JSON payloads of an event stream, `[DONE]` left out. */
const payloadsOf = async (response: Response): Promise<Json[]> =>
  (await response.text())
    .split('\n\n')
    .map((block) =>
      block
        .split('\n')
        .find((line) => line.startsWith('data: '))
        ?.slice(6),
    )
    .filter((data): data is string => data !== undefined && data !== '[DONE]')
    .map((data) => JSON.parse(data) as Json);

const schema = { type: 'object', properties: { query: { type: 'string' }, limit: { type: 'integer' } }, required: ['query', 'limit'] };
const expected = { query: 'echo', limit: 0 };
const chatTools = [
  { type: 'function', function: { name: 'search', parameters: schema } },
  { type: 'function', function: { name: 'other', parameters: { type: 'object', properties: {} } } },
];
const responsesTools = [
  { type: 'function', name: 'search', parameters: schema },
  { type: 'function', name: 'other', parameters: { type: 'object', properties: {} } },
];
const messagesTools = [
  { name: 'search', input_schema: schema },
  { name: 'other', input_schema: { type: 'object', properties: {} } },
];

test('exampleOf builds the smallest value a schema accepts', (t) => {
  t.deepEqual(
    exampleOf({
      type: 'object',
      properties: {
        text: { type: 'string' },
        count: { type: 'number' },
        positive: { type: 'integer', exclusiveMinimum: 0 },
        negative: { type: 'integer', maximum: -2 },
        flag: { type: 'boolean' },
        mode: { enum: ['fast', 'slow'] },
        fixed: { const: 7 },
        nullable: { type: ['null', 'string'] },
        either: { anyOf: [{ type: 'boolean' }, { type: 'string' }] },
        list: { type: 'array', items: { type: 'string' } },
        pair: { type: 'array', items: { type: 'integer' }, minItems: 2 },
        nested: { type: 'object', properties: { inner: { type: 'string' }, skipped: { type: 'string' } }, required: ['inner'] },
        referenced: { $ref: '#/$defs/point' },
        optional: { type: 'string' },
      },
      required: ['text', 'count', 'positive', 'negative', 'flag', 'mode', 'fixed', 'nullable', 'either', 'list', 'pair', 'nested', 'referenced'],
      $defs: { point: { type: 'object', properties: { x: { type: 'number' } }, required: ['x'] } },
    }),
    {
      text: 'echo',
      count: 0,
      positive: 1,
      negative: -2,
      flag: true,
      mode: 'fast',
      fixed: 7,
      nullable: 'echo',
      either: true,
      list: [],
      pair: [0, 0],
      nested: { inner: 'echo' },
      referenced: { x: 0 },
    },
  );
  const recursive = { type: 'object', properties: { child: { $ref: '#' } }, required: ['child'] };
  t.notThrows(() => exampleOf(recursive), 'a recursive schema ends');
});

test('chat completions: offered tools, echo calls the first, whole and streamed', async (t) => {
  const request = { model: 'echo-1', messages: [{ role: 'user', content: 'Find it.' }], tools: chatTools };
  const whole = (await (await t.context.post('/v1/chat/completions', request)).json()) as Json;
  t.is(whole.choices[0].finish_reason, 'tool_calls');
  t.is(whole.choices[0].message.content, null);
  const [call] = whole.choices[0].message.tool_calls as Json[];
  t.like(call, { type: 'function', function: { name: 'search' } });
  t.regex(call!.id, /^call_/);
  t.deepEqual(JSON.parse(call!.function.arguments), expected);

  const chunks = await payloadsOf(await t.context.post('/v1/chat/completions', { ...request, stream: true }));
  const first = chunks[0]!.choices[0].delta.tool_calls[0];
  t.regex(first.id, /^call_/);
  t.like(first, { index: 0, type: 'function', function: { name: 'search', arguments: '' } });
  const pieces = chunks.slice(1).flatMap((chunk) => (chunk.choices[0].delta.tool_calls ?? []).map((delta: Json) => delta.function.arguments as string));
  t.true(pieces.length > 1, 'the arguments arrive in pieces');
  t.is(pieces.join(''), call!.function.arguments);
  t.is(chunks.at(-1)!.choices[0].finish_reason, 'tool_calls');
});

test('chat completions: after a tool message, echo answers with text about the result; tool_choice none and a named tool are respected', async (t) => {
  const messages = [
    { role: 'user', content: 'Find it.' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'search', arguments: '{}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'Found 3 pages.' },
  ];
  const answer = (await (await t.context.post('/v1/chat/completions', { model: 'echo-1', messages, tools: chatTools })).json()) as Json;
  t.is(answer.choices[0].finish_reason, 'stop');
  t.regex(answer.choices[0].message.content, /The tool result says: "Found 3 pages\."/);
  t.is(answer.choices[0].message.tool_calls, undefined);

  const base = { model: 'echo-1', messages: [{ role: 'user', content: 'Find it.' }], tools: chatTools };
  const none = (await (await t.context.post('/v1/chat/completions', { ...base, tool_choice: 'none' })).json()) as Json;
  t.is(none.choices[0].finish_reason, 'stop');
  const named = (await (
    await t.context.post('/v1/chat/completions', { ...base, tool_choice: { type: 'function', function: { name: 'other' } } })
  ).json()) as Json;
  t.like(named.choices[0].message.tool_calls[0], { function: { name: 'other', arguments: '{}' } });
});

test('responses: offered tools, echo answers with a function_call item, whole and streamed', async (t) => {
  const request = { model: 'echo-1', input: 'Find it.', tools: responsesTools };
  const whole = (await (await t.context.post('/v1/responses', request)).json()) as Json;
  t.is(whole.status, 'completed');
  const [item] = whole.output as Json[];
  t.like(item, { type: 'function_call', status: 'completed', name: 'search' });
  t.regex(item!.call_id, /^call_/);
  t.deepEqual(JSON.parse(item!.arguments), expected);

  const streamed = await payloadsOf(await t.context.post('/v1/responses', { ...request, stream: true }));
  t.deepEqual(
    [...new Set(streamed.map((event) => event.type))],
    [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ],
  );
  t.deepEqual(
    streamed.map((event) => event.sequence_number),
    streamed.map((_, index) => index),
  );
  const added = streamed[2]!.item as Json;
  t.like(added, { type: 'function_call', status: 'in_progress', name: 'search', arguments: '' });
  const deltas = streamed.filter((event) => event.type === 'response.function_call_arguments.delta');
  t.true(deltas.length > 1, 'the arguments arrive in pieces');
  t.true(deltas.every((event) => event.item_id === added.id && event.output_index === 0));
  t.is(deltas.map((event) => event.delta as string).join(''), item!.arguments);
  t.like(
    streamed.find((event) => event.type === 'response.function_call_arguments.done'),
    { item_id: added.id, arguments: item!.arguments },
  );
  const done = streamed.find((event) => event.type === 'response.output_item.done')!.item as Json;
  t.like(done, { id: added.id, call_id: added.call_id, status: 'completed', arguments: item!.arguments });
  t.deepEqual(streamed.at(-1)!.response.output, [done]);
});

test('responses: after a function_call_output, echo answers with text; tool_choice none is respected', async (t) => {
  const input = [
    { role: 'user', content: 'Find it.' },
    { type: 'function_call', call_id: 'call_1', name: 'search', arguments: '{}' },
    { type: 'function_call_output', call_id: 'call_1', output: 'Found 3 pages.' },
  ];
  const answer = (await (await t.context.post('/v1/responses', { model: 'echo-1', input, tools: responsesTools })).json()) as Json;
  t.is(answer.output[0].type, 'message');
  t.regex(answer.output[0].content[0].text, /The tool result says: "Found 3 pages\."/);
  const none = (await (
    await t.context.post('/v1/responses', { model: 'echo-1', input: 'Find it.', tools: responsesTools, tool_choice: 'none' })
  ).json()) as Json;
  t.is(none.output[0].type, 'message');
});

test('messages: offered tools, echo answers with a tool_use block, whole and streamed', async (t) => {
  const request = { model: 'echo-1', max_tokens: 100, messages: [{ role: 'user', content: 'Find it.' }], tools: messagesTools };
  const whole = (await (await t.context.post('/v1/messages', request)).json()) as Json;
  t.is(whole.stop_reason, 'tool_use');
  const [block] = whole.content as Json[];
  t.like(block, { type: 'tool_use', name: 'search', input: expected });
  t.regex(block!.id, /^toolu_/);

  const streamed = await payloadsOf(await t.context.post('/v1/messages', { ...request, stream: true }));
  t.like(streamed[1], { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', name: 'search', input: {} } });
  t.regex(streamed[1]!.content_block.id, /^toolu_/);
  const deltas = streamed.filter((event) => event.type === 'content_block_delta').map((event) => event.delta as Json);
  t.true(deltas.length > 1);
  t.true(deltas.every((delta) => delta.type === 'input_json_delta'));
  t.deepEqual(JSON.parse(deltas.map((delta) => delta.partial_json as string).join('')), expected);
  t.like(
    streamed.find((event) => event.type === 'message_delta'),
    { delta: { stop_reason: 'tool_use' } },
  );
});

test('messages: after a tool_result, echo answers with text; tool_choice none is respected', async (t) => {
  const messages = [
    { role: 'user', content: 'Find it.' },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'search', input: {} }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'Found 3 pages.' }] }] },
  ];
  const answer = (await (await t.context.post('/v1/messages', { model: 'echo-1', max_tokens: 100, messages, tools: messagesTools })).json()) as Json;
  t.is(answer.stop_reason, 'end_turn');
  t.regex(answer.content[0].text, /The tool result says: "Found 3 pages\."/);
  const none = (await (
    await t.context.post('/v1/messages', {
      model: 'echo-1',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Find it.' }],
      tools: messagesTools,
      tool_choice: { type: 'none' },
    })
  ).json()) as Json;
  t.is(none.stop_reason, 'end_turn');
});

// The model routes' shapes, on dottedGateway's catalog.
const ANTHROPIC = { 'anthropic-version': '2023-06-01' };
const REQUEST_ID = /^req_[A-Za-z0-9]{32}$/;

async function get(path: string, key: string, headers: Record<string, string> = {}) {
  const response = await fetch(`${dottedGateway.url}${path}`, { headers: { 'x-api-key': key, ...headers } });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

const ids = (page: Record<string, unknown>) => (page.data as Array<{ id: string }>).map((model) => model.id);

test('GET /v1/models/{model}: the model in OpenAI shape, ids with dots and slashes sent as they are or encoded', async (t) => {
  const key = await dottedGateway.keyFor(['models:read']);
  t.deepEqual((await get('/v1/models/gpt-test', key)).body, { id: 'gpt-test', object: 'model', created: 1_744_000_100, owned_by: 'openai' });
  const expected = { id: 'acme/llama-3.1-8b', object: 'model', created: 1_744_000_300, owned_by: 'local' };
  t.deepEqual((await get('/v1/models/acme/llama-3.1-8b', key)).body, expected);
  t.deepEqual((await get(`/v1/models/${encodeURIComponent('acme/llama-3.1-8b')}`, key)).body, expected);
});

// Every field of @anthropic-ai/sdk's ModelInfo: the token limits the catalog says, null for what it cannot.
const MODEL_INFO_UNKNOWNS = { lifecycle: 'active', deprecated_at: null, retires_at: null, capabilities: null, line: null };
const unknownLimits = { max_input_tokens: null, max_tokens: null, ...MODEL_INFO_UNKNOWNS };

test('GET /v1/models/{model}: with anthropic-version, Anthropic shape, display_name defaulting to the id, token limits as the catalog says them', async (t) => {
  const key = await dottedGateway.keyFor(['models:read']);
  t.deepEqual((await get('/v1/models/acme/llama-3.1-8b', key, ANTHROPIC)).body, {
    type: 'model',
    id: 'acme/llama-3.1-8b',
    display_name: 'Llama 3.1 8B',
    created_at: '2025-04-07T04:31:40Z',
    max_input_tokens: 128_000,
    max_tokens: 8192,
    ...MODEL_INFO_UNKNOWNS,
  });
  t.deepEqual((await get('/v1/models/m4', key, ANTHROPIC)).body, {
    type: 'model',
    id: 'm4',
    display_name: 'm4',
    created_at: '1970-01-01T00:00:00Z',
    ...unknownLimits,
  });
});

test('GET /v1/models/{model}: a model outside the allowlist is the same 404 as one that does not exist, in either shape', async (t) => {
  const restricted = await dottedGateway.keyFor(['models:read'], { models: ['echo-1'] });
  const unrestricted = await dottedGateway.keyFor(['models:read']);
  const notFoundA = (id: string) => ({
    error: { message: `The model '${id}' does not exist`, type: 'invalid_request_error', param: null, code: 'model_not_found' },
  });
  const outsideA = await get('/v1/models/gpt-test', restricted);
  const unknownA = await get('/v1/models/no-such-model', unrestricted);
  t.deepEqual([outsideA.status, outsideA.body], [404, notFoundA('gpt-test')]);
  t.deepEqual([unknownA.status, unknownA.body], [404, notFoundA('no-such-model')]);

  const outsideB = await get('/v1/models/gpt-test', restricted, ANTHROPIC);
  const unknownB = await get('/v1/models/no-such-model', unrestricted, ANTHROPIC);
  const notFoundB = { type: 'error', error: { type: 'not_found_error', message: 'Model not found' } };
  for (const response of [outsideB, unknownB]) {
    t.is(response.status, 404);
    t.deepEqual(response.body, { ...notFoundB, request_id: response.headers.get('request-id') });
    t.regex(response.headers.get('request-id') ?? '', REQUEST_ID);
  }
});

test('GET /v1/models/{model} needs models:read', async (t) => {
  const { status, body } = await get('/v1/models/echo-1', await dottedGateway.keyFor(['chat:completions']), ANTHROPIC);
  t.is(status, 403);
  t.like(body, { type: 'error', error: { type: 'permission_error', message: 'Forbidden' } });
});

test('GET /v1/models with anthropic-version: Anthropic shape, filtered by the allowlist', async (t) => {
  const key = await dottedGateway.keyFor(['models:read'], { models: ['claude-test', 'echo-1'] });
  const { status, headers, body } = await get('/v1/models', key, ANTHROPIC);
  t.is(status, 200);
  t.regex(headers.get('request-id') ?? '', REQUEST_ID);
  t.deepEqual(body, {
    data: [
      { type: 'model', id: 'echo-1', display_name: 'echo-1', created_at: '2025-04-07T04:26:40Z', ...unknownLimits },
      { type: 'model', id: 'claude-test', display_name: 'claude-test', created_at: '2025-04-07T04:30:00Z', ...unknownLimits },
    ],
    has_more: false,
    first_id: 'echo-1',
    last_id: 'claude-test',
  });
});

test('GET /v1/models with anthropic-version pages by limit, after_id and before_id', async (t) => {
  const key = await dottedGateway.keyFor(['models:read']);
  const page = async (query: string) => (await get(`/v1/models?${query}`, key, ANTHROPIC)).body;
  const first = await page('limit=2');
  t.deepEqual(ids(first), ['echo-1', 'gpt-test']);
  t.like(first, { has_more: true, first_id: 'echo-1', last_id: 'gpt-test' });
  const second = await page(`limit=2&after_id=${first.last_id as string}`);
  t.deepEqual(ids(second), ['claude-test', 'acme/llama-3.1-8b']);
  t.true(second.has_more);
  const last = await page(`limit=2&after_id=${encodeURIComponent(second.last_id as string)}`);
  t.deepEqual(ids(last), ['m4', 'm5']);
  t.false(last.has_more);
  t.deepEqual(await page('after_id=m5'), { data: [], has_more: false, first_id: null, last_id: null });

  const before = await page('limit=2&before_id=m4');
  t.deepEqual(ids(before), ['claude-test', 'acme/llama-3.1-8b']);
  t.true(before.has_more);
  const start = await page('limit=2&before_id=claude-test');
  t.deepEqual(ids(start), ['echo-1', 'gpt-test']);
  t.false(start.has_more);
  t.deepEqual(ids(await page('')), ['echo-1', 'gpt-test', 'claude-test', 'acme/llama-3.1-8b', 'm4', 'm5']);
});

test('GET /v1/models with anthropic-version: a bad limit or cursor is 400 in Shape B; cursors never reveal models outside the list', async (t) => {
  const key = await dottedGateway.keyFor(['models:read'], { models: ['echo-1'] });
  for (const query of ['limit=0', 'limit=1001', 'limit=x', 'limit=1&limit=2', 'after_id=echo-1&before_id=echo-1', 'after_id=gpt-test', 'before_id=nope']) {
    const { status, headers, body } = await get(`/v1/models?${query}`, key, ANTHROPIC);
    t.is(status, 400, query);
    t.like(body, { type: 'error', error: { type: 'invalid_request_error' }, request_id: headers.get('request-id') }, query);
  }
  // The OpenAI shape has no paging: the same query is ignored.
  t.is((await get('/v1/models?limit=0', key)).status, 200);
});

test('with anthropic-version, /v1/models refusals are in Shape B with request-id, 401 included', async (t) => {
  const response = await get('/v1/models', 'kmg_sk_unknown', ANTHROPIC);
  t.is(response.status, 401);
  t.deepEqual(response.body, {
    type: 'error',
    error: { type: 'authentication_error', message: 'Invalid API key' },
    request_id: response.headers.get('request-id'),
  });
  const openAI = await get('/v1/models', 'kmg_sk_unknown');
  t.like(openAI.body, { error: { code: 'invalid_api_key' } });
});

test("anthropic-version decides by its presence, an empty value too: the models list and the files API answer in Anthropic's shape", async (t) => {
  const empty = { 'anthropic-version': '' };
  t.like((await get('/v1/models', 'kmg_sk_unknown', empty)).body, { type: 'error', error: { type: 'authentication_error' } });
  t.like((await get('/v1/models', await dottedGateway.keyFor(), empty)).body, { has_more: false });
  const headers = { 'x-api-key': referenceKey, ...empty };
  const list = await fetch(`${referenceGateway.url}/v1/files`, { headers });
  t.like(await list.json(), { data: [], has_more: false, first_id: null });
  const refused = await fetch(`${referenceGateway.url}/v1/files/nope`, { headers });
  t.like(await refused.json(), { type: 'error', error: { type: 'invalid_request_error', message: 'Invalid file ID' } });
  t.regex(refused.headers.get('request-id') ?? '', /^req_/);
});

// The splitting of event streams, and the error events written into them.

/** The events each chunk completes, then those of the end. */
function regroup(chunks: Array<string | Buffer>): string[][] {
  const splitter = new EventSplitter();
  return [...chunks.map((chunk) => splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)), splitter.end()];
}

test('whole events pass at once; a partial event waits for its end', (t) => {
  t.deepEqual(regroup(['data: 1\n\ndata: 2\n\n']), [['data: 1\n\n', 'data: 2\n\n'], []]);
  t.deepEqual(regroup(['data: 1\n\ndata: 2', '2\n', '\n']), [['data: 1\n\n'], [], ['data: 22\n\n'], []]);
  t.deepEqual(regroup(['event: a\r\ndata: 1\r\n\r\n', 'data: 2\r', '\n\r', '\n']), [['event: a\r\ndata: 1\r\n\r\n'], [], [], ['data: 2\r\n\r\n'], []]);
});

test('a multi-byte character split across chunks is kept whole', (t) => {
  const bytes = Buffer.from('data: "é€"\n\n');
  const events = regroup([...bytes].map((byte) => Buffer.of(byte))).flat();
  t.deepEqual(events, ['data: "é€"\n\n']);
});

test('what is left when the upstream ends normally is passed on as it is', (t) => {
  t.deepEqual(regroup(['data: 1\n\ndata: [DONE]\n']), [['data: 1\n\n'], ['data: [DONE]\n']]);
});

test('error events carry the fields of the two error shapes', (t) => {
  t.is(
    openAIErrorEvent(errors.upstreamTimeout()),
    'data: {"error":{"message":"Upstream provider timed out","type":"server_error","param":null,"code":"upstream_timeout"}}\n\n',
  );
  t.is(
    anthropicErrorEvent(errors.upstreamError(), 'req_abc'),
    'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"Upstream provider error"},"request_id":"req_abc"}\n\n',
  );
});

test('events split whatever their line ends; a rewritten event keeps its other fields', (t) => {
  t.deepEqual(regroup(['data: 1\n\nevent: a\r\ndata: 2\r\n\r\ndata: 3\r\rdata: [DONE]\n']), [
    ['data: 1\n\n', 'event: a\r\ndata: 2\r\n\r\n', 'data: 3\r\r'],
    ['data: [DONE]\n'],
  ]);
  t.deepEqual(eventFields('event:message_start\nid: 7\ndata: {"a":\ndata: 1}\n\n'), { name: 'message_start', data: '{"a":\n1}' });
  t.deepEqual(eventFields(': a comment\n\n'), { name: undefined, data: undefined });
  t.is(withData('event: message_start\r\nid: 7\r\ndata: {"old":1}\r\n\r\n', '{"new":2}'), 'event: message_start\nid: 7\ndata: {"new":2}\n\n');
});
