import anyTest, { type TestFn } from 'ava';
import { exampleOf } from '../../lib/models/providers/echo/tools.js';
import { checkedFetch } from '../helpers/openapi.js';
import { referenceApp } from '../spec/reference-app.js';

// The echo provider in a tool loop, on the wire: each format's call, whole and streamed, as the
// real APIs give it; the text answer after a tool result; `tool_choice` none. Every answer is
// checked against docs/openapi.json.

const test = anyTest as TestFn<{ problems: string[]; post: (path: string, body: unknown) => Promise<Response> }>;

const gateway = await referenceApp({ models: [{ id: 'echo-1', provider: 'echo' }] });
test.after.always(() => gateway.close());
const key = await gateway.keyFor();
test.beforeEach((t) => {
  t.context.problems = [];
  const fetch = checkedFetch(t.context.problems);
  t.context.post = (path, body) =>
    fetch(`${gateway.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
});
test.afterEach((t) => t.deepEqual(t.context.problems, [], 'every answer agrees with docs/openapi.json'));

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the wire's JSON, read field by field
type Json = Record<string, any>;

/** The JSON payloads of an event stream, `[DONE]` left out. */
const events = async (response: Response): Promise<Json[]> =>
  (await response.text())
    .split('\n\n')
    .map((block) => block.split('\n').find((line) => line.startsWith('data: '))?.slice(6))
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
    { text: 'echo', count: 0, positive: 1, negative: -2, flag: true, mode: 'fast', fixed: 7, nullable: 'echo', either: true, list: [], pair: [0, 0], nested: { inner: 'echo' }, referenced: { x: 0 } },
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

  const chunks = await events(await t.context.post('/v1/chat/completions', { ...request, stream: true }));
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
  const named = (await (await t.context.post('/v1/chat/completions', { ...base, tool_choice: { type: 'function', function: { name: 'other' } } })).json()) as Json;
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

  const streamed = await events(await t.context.post('/v1/responses', { ...request, stream: true }));
  t.deepEqual(
    [...new Set(streamed.map((event) => event.type))],
    ['response.created', 'response.in_progress', 'response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.done', 'response.output_item.done', 'response.completed'],
  );
  t.deepEqual(streamed.map((event) => event.sequence_number), streamed.map((_, index) => index));
  const added = streamed[2]!.item as Json;
  t.like(added, { type: 'function_call', status: 'in_progress', name: 'search', arguments: '' });
  const deltas = streamed.filter((event) => event.type === 'response.function_call_arguments.delta');
  t.true(deltas.length > 1, 'the arguments arrive in pieces');
  t.true(deltas.every((event) => event.item_id === added.id && event.output_index === 0));
  t.is(deltas.map((event) => event.delta as string).join(''), item!.arguments);
  t.like(streamed.find((event) => event.type === 'response.function_call_arguments.done'), { item_id: added.id, arguments: item!.arguments });
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
  const none = (await (await t.context.post('/v1/responses', { model: 'echo-1', input: 'Find it.', tools: responsesTools, tool_choice: 'none' })).json()) as Json;
  t.is(none.output[0].type, 'message');
});

test('messages: offered tools, echo answers with a tool_use block, whole and streamed', async (t) => {
  const request = { model: 'echo-1', max_tokens: 100, messages: [{ role: 'user', content: 'Find it.' }], tools: messagesTools };
  const whole = (await (await t.context.post('/v1/messages', request)).json()) as Json;
  t.is(whole.stop_reason, 'tool_use');
  const [block] = whole.content as Json[];
  t.like(block, { type: 'tool_use', name: 'search', input: expected });
  t.regex(block!.id, /^toolu_/);

  const streamed = await events(await t.context.post('/v1/messages', { ...request, stream: true }));
  t.like(streamed[1], { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', name: 'search', input: {} } });
  t.regex(streamed[1]!.content_block.id, /^toolu_/);
  const deltas = streamed.filter((event) => event.type === 'content_block_delta').map((event) => event.delta as Json);
  t.true(deltas.length > 1);
  t.true(deltas.every((delta) => delta.type === 'input_json_delta'));
  t.deepEqual(JSON.parse(deltas.map((delta) => delta.partial_json as string).join('')), expected);
  t.like(streamed.find((event) => event.type === 'message_delta'), { delta: { stop_reason: 'tool_use' } });
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
    await t.context.post('/v1/messages', { model: 'echo-1', max_tokens: 100, messages: [{ role: 'user', content: 'Find it.' }], tools: messagesTools, tool_choice: { type: 'none' } })
  ).json()) as Json;
  t.is(none.stop_reason, 'end_turn');
});
