import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import Anthropic from '@anthropic-ai/sdk';
import test from 'ava';
import { priceCatalog } from '../../lib/cost/price-table.js';
import type { CatalogModel } from '../../lib/models/catalog.js';
import { vertexAnthropicProvider } from '../../lib/models/providers/vertex/index.js';
import { providerRegistry } from '../../lib/models/providers/registry.js';
import type { CooldownStore } from '../../lib/models/routing/cooldown-store.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { configuredProviders, parseGatewayConfig } from '../../reference-server/config.js';
import { modelsApp } from '../helpers/models-app.js';
import { until } from '../helpers/poll.js';
import {
  anthropicError,
  googleError,
  MOCK_LOCATION,
  MOCK_PROJECT,
  MOCK_TOKEN,
  sse,
  vertexAnthropicMock,
  type VertexReply,
} from '../helpers/vertex-anthropic-mock.js';

// The vertex-anthropic kind: Claude on Vertex AI's rawPredict and streamRawPredict, against a mock
// of them built from the published reference. Messages passes through; Chat Completions and
// Responses are translated to it.

// biome-ignore lint/suspicious/noExplicitAny: the wire's JSON, read field by field
type Json = Record<string, any>;
const SONNET = 'claude-sonnet-4@20250514';

const mock = await vertexAnthropicMock();
const provider = (id: string, token = MOCK_TOKEN) =>
  vertexAnthropicProvider({ id, project: MOCK_PROJECT, location: MOCK_LOCATION, baseURL: mock.url, auth: { getAccessToken: async () => token } });
const { models: catalog, unpriced } = await priceCatalog<CatalogModel>([
  // Priced from the maintained table, by Vertex AI's name of the model.
  { id: 'claude', provider: 'vertex-claude', upstreamModel: SONNET },
  {
    id: 'routed',
    deployments: [
      { provider: 'vertex-claude', upstreamModel: 'claude-first@1' },
      { provider: 'vertex-claude-spare', upstreamModel: 'claude-second@1' },
    ],
    price: { input: 1, output: 1 },
  },
  { id: 'untokened', provider: 'vertex-claude-wrong-token', upstreamModel: SONNET, price: { input: 1, output: 1 } },
]);
// The cost of USAGE (below) at the table's prices per million tokens: new input, the cache's reads and writes, output.
const { input = 0, output = 0, cacheRead = 0, cacheWrite = 0 } = catalog[0]?.price ?? {};
const USAGE_COST = Math.round((10 * input + 30 * cacheRead + 20 * cacheWrite + 5 * output) * 1_000_000);
const records: UsageRecord[] = [];
/** The deployments that failed in a way that cools them down. */
const cooled: string[] = [];
const cooldowns: CooldownStore = {
  fail: async (deployment) => {
    cooled.push(deployment);
    return null;
  },
  coolingUntil: async (deployments) => deployments.map(() => null),
};
const gateway = await modelsApp({
  catalog,
  providers: [provider('vertex-claude'), provider('vertex-claude-spare'), provider('vertex-claude-wrong-token', 'ya29.expired')],
  usageRecorder: { record: (record) => void records.push(record) },
  routing: { maxAttempts: 2, random: () => 0, sleep: async () => {}, cooldown: { store: cooldowns } },
});
test.after.always(() => Promise.all([gateway.close(), mock.close()]));
const key = await gateway.keyFor();

type Format = 'chat' | 'responses' | 'messages';
const FORMATS: Format[] = ['chat', 'responses', 'messages'];
const PATHS: Record<Format, string> = { chat: '/v1/chat/completions', responses: '/v1/responses', messages: '/v1/messages' };
const HEADERS: Record<Format, Record<string, string>> = {
  chat: { authorization: `Bearer ${key}` },
  responses: { authorization: `Bearer ${key}` },
  messages: { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
};
const WEATHER_SCHEMA = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
const TOOLS: Record<Format, unknown[]> = {
  chat: [{ type: 'function', function: { name: 'weather', parameters: WEATHER_SCHEMA } }],
  responses: [{ type: 'function', name: 'weather', parameters: WEATHER_SCHEMA }],
  messages: [{ name: 'weather', input_schema: WEATHER_SCHEMA }],
};
/** A call of `format` to `model` saying `text`, with `extra` fields. */
function body(format: Format, model: string, text: string, extra: Json = {}): Json {
  if (format === 'responses') return { model, input: text, ...extra };
  if (format === 'messages') return { model, max_tokens: 300, messages: [{ role: 'user', content: text }], ...extra };
  return { model, messages: [{ role: 'user', content: text }], ...extra };
}
const call = async (format: Format, payload: Json, headers: Record<string, string> = {}) => {
  const res = await gateway.post(PATHS[format], payload, { ...HEADERS[format], ...headers });
  return { status: res.status, headers: res.headers, text: await res.text() };
};
/** The data of each server-sent event, parsed, with its event name. */
const events = (text: string) =>
  text
    .split('\n\n')
    .filter((event) => /^data: /m.test(event))
    .map((event) => {
      const data = /^data: (.*)$/m.exec(event)?.[1] ?? '';
      return { name: /^event: (.*)$/m.exec(event)?.[1], data: (data === '[DONE]' ? {} : JSON.parse(data)) as Json };
    });

/** What a client got, whatever its format: the text, the tool calls (id, name, arguments) and the stop reason in its format's words. */
function outcome(format: Format, text: string, stream: boolean): { text: string; calls: Array<[string, string, unknown]>; stop: string } {
  const data = stream ? events(text).map((event) => event.data) : [];
  if (format === 'responses') {
    const response = stream ? data.find((event) => /^response\.(completed|incomplete)$/.test(event.type))?.response : JSON.parse(text);
    const output: Json[] = response.output;
    return {
      text: output.flatMap((item) => (item.type === 'message' ? item.content.map((part: Json) => part.text) : [])).join(''),
      calls: output.filter((item) => item.type === 'function_call').map((item) => [item.call_id, item.name, JSON.parse(item.arguments)]),
      stop: response.incomplete_details ? `${response.status}:${response.incomplete_details.reason}` : response.status,
    };
  }
  if (format === 'chat') {
    if (!stream) {
      const [choice] = JSON.parse(text).choices;
      const calls = (choice.message.tool_calls ?? []).map((call: Json) => [call.id, call.function.name, JSON.parse(call.function.arguments)]);
      return { text: choice.message.content ?? '', calls, stop: choice.finish_reason };
    }
    const deltas = data.map((chunk) => chunk.choices?.[0]).filter(Boolean);
    const calls = new Map<number, { id: string; name: string; args: string }>();
    for (const delta of deltas.flatMap((choice) => choice.delta?.tool_calls ?? [])) {
      const known = calls.get(delta.index) ?? { id: '', name: '', args: '' };
      calls.set(delta.index, { id: delta.id ?? known.id, name: delta.function?.name ?? known.name, args: known.args + (delta.function?.arguments ?? '') });
    }
    return {
      text: deltas.map((choice) => choice.delta?.content ?? '').join(''),
      calls: [...calls.values()].map((call) => [call.id, call.name, JSON.parse(call.args)]),
      stop: deltas.findLast((choice) => choice.finish_reason)?.finish_reason,
    };
  }
  if (!stream) {
    const message = JSON.parse(text);
    const blocks: Json[] = message.content;
    return {
      text: blocks.map((block) => block.text ?? '').join(''),
      calls: blocks.filter((block) => block.type === 'tool_use').map((block) => [block.id, block.name, block.input]),
      stop: message.stop_reason,
    };
  }
  const blocks = new Map<number, Json>();
  for (const event of data) {
    if (event.type === 'content_block_start') blocks.set(event.index, { ...event.content_block, json: '' });
    const block = blocks.get(event.index);
    if (event.type === 'content_block_delta' && block) {
      block.text = (block.text ?? '') + (event.delta.text ?? '');
      block.json += event.delta.partial_json ?? '';
    }
  }
  return {
    text: [...blocks.values()].map((block) => block.text ?? '').join(''),
    calls: [...blocks.values()].filter((block) => block.type === 'tool_use').map((block) => [block.id, block.name, JSON.parse(block.json)]),
    stop: data.find((event) => event.type === 'message_delta')?.delta.stop_reason,
  };
}

// Anthropic's answers as Vertex AI gives them: a message id of its own, the usage with the cache's reads and writes apart.
const USAGE = { input_tokens: 10, cache_creation_input_tokens: 20, cache_read_input_tokens: 30, output_tokens: 5 };
const message = (content: Json[], stopReason = 'end_turn') => ({
  id: 'msg_vrtx_01HvH9',
  type: 'message',
  role: 'assistant',
  model: 'claude-sonnet-4-20250514',
  content,
  stop_reason: stopReason,
  stop_sequence: null,
  usage: USAGE,
});
/** The events of a stream of `content` (text split in two deltas, a tool use's input in two), as streamRawPredict writes them. */
function messageEvents(content: Json[], stopReason = 'end_turn'): string[] {
  const out = [sse({ type: 'message_start', message: { ...message([]), stop_reason: null, usage: { ...USAGE, output_tokens: 1 } } })];
  out.push(sse({ type: 'ping' }));
  for (const [index, block] of content.entries()) {
    if (block.type === 'text') {
      out.push(sse({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } }));
      const half = Math.ceil(block.text.length / 2);
      for (const text of [block.text.slice(0, half), block.text.slice(half)])
        out.push(sse({ type: 'content_block_delta', index, delta: { type: 'text_delta', text } }));
    } else {
      out.push(sse({ type: 'content_block_start', index, content_block: { ...block, input: {} } }));
      const json = JSON.stringify(block.input);
      for (const partial_json of [json.slice(0, 5), json.slice(5)])
        out.push(sse({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json } }));
    }
    out.push(sse({ type: 'content_block_stop', index }));
  }
  out.push(sse({ type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: USAGE.output_tokens } }));
  out.push(sse({ type: 'message_stop' }));
  return out;
}
const answering =
  (content: Json[], stopReason?: string) =>
  ({ body }: { body: Json }): VertexReply =>
    body.stream === true ? { events: messageEvents(content, stopReason) } : { json: message(content, stopReason) };

/** The usage record of the call made after `count` records: the record is written once the answer has ended. */
const recordAfter = async (count: number) => {
  await until(
    async () => records.length,
    (length) => length > count,
  );
  return records[count];
};
const TEXT_STOP: Record<Format, string> = { chat: 'stop', responses: 'completed', messages: 'end_turn' };
const TOOL_STOP: Record<Format, string> = { chat: 'tool_calls', responses: 'completed', messages: 'tool_use' };
const LENGTH_STOP: Record<Format, string> = { chat: 'length', responses: 'incomplete:max_output_tokens', messages: 'max_tokens' };
const PARALLEL = [
  { type: 'text', text: 'Checking both.' },
  { type: 'tool_use', id: 'toolu_vrtx_paris', name: 'weather', input: { city: 'Paris' } },
  { type: 'tool_use', id: 'toolu_vrtx_oslo', name: 'weather', input: { city: 'Oslo' } },
];

for (const format of FORMATS) {
  for (const stream of [false, true]) {
    const mode = stream ? 'streamed' : 'JSON';
    test.serial(`${format}, ${mode}: a Claude answer on Vertex AI, its stop reason, and usage counting the cache's reads and writes`, async (t) => {
      mock.script(answering([{ type: 'text', text: 'Hello from Vertex.' }]));
      const before = mock.calls.length;
      const counted = records.length;
      const answer = await call(format, body(format, 'claude', 'Hi', { ...(stream && { stream }) }));
      t.is(answer.status, 200, answer.text);
      t.is(answer.headers.get('x-kmg-deployment'), 'vertex-claude');
      t.like(outcome(format, answer.text, stream), { text: 'Hello from Vertex.', stop: TEXT_STOP[format] });
      const sent = mock.calls[before];
      t.is(sent?.method, stream ? 'streamRawPredict' : 'rawPredict');
      t.is(sent?.model, SONNET);
      t.is(sent?.headers.authorization, `Bearer ${MOCK_TOKEN}`);
      t.like(sent?.body, { anthropic_version: 'vertex-2023-10-16', messages: [{ role: 'user' }] });
      t.like(await recordAfter(counted), { provider: 'vertex-claude', stream, inputTokens: 60, outputTokens: 5, costPicoUsd: USAGE_COST });
    });

    test.serial(`${format}, ${mode}: parallel tool calls come back in order with their ids, the tools sent as Messages' tools`, async (t) => {
      mock.script(answering(PARALLEL, 'tool_use'));
      const before = mock.calls.length;
      const answer = await call(format, body(format, 'claude', 'Weather in Paris and Oslo?', { tools: TOOLS[format], ...(stream && { stream }) }));
      t.is(answer.status, 200, answer.text);
      t.like(outcome(format, answer.text, stream), {
        calls: [
          ['toolu_vrtx_paris', 'weather', { city: 'Paris' }],
          ['toolu_vrtx_oslo', 'weather', { city: 'Oslo' }],
        ],
        stop: TOOL_STOP[format],
      });
      t.like(mock.calls[before]?.body.tools[0], { name: 'weather', input_schema: WEATHER_SCHEMA });
    });

    test.serial(`${format}, ${mode}: an answer cut at max_tokens says so in the client's words`, async (t) => {
      mock.script(answering([{ type: 'text', text: 'Cut sh' }], 'max_tokens'));
      const answer = await call(format, body(format, 'claude', 'Hi', { ...(stream && { stream }) }));
      t.is(answer.status, 200, answer.text);
      t.is(outcome(format, answer.text, stream).stop, LENGTH_STOP[format]);
    });
  }

  test.serial(`${format}: an error event in the middle of the stream ends the client's stream in its error event`, async (t) => {
    mock.script(() => ({
      events: [...messageEvents([{ type: 'text', text: 'Half an answer' }]).slice(0, 4), sse(anthropicError('overloaded_error', 'Overloaded'))],
    }));
    const answer = await call(format, body(format, 'claude', 'Hi', { stream: true }));
    t.is(answer.status, 200);
    const last = events(answer.text).at(-1);
    if (format === 'messages') t.is(last?.name, 'error');
    else if (format === 'responses') t.is(last?.data.type, 'error');
    else t.truthy(last?.data.error);
  });

  test.serial(`${format}: Vertex AI's refusal of the request is a 400 with its message`, async (t) => {
    mock.script(() => ({ status: 400, json: anthropicError('invalid_request_error', 'messages: text content blocks must be non-empty') }));
    const answer = await call(format, body(format, 'claude', 'Hi'));
    t.is(answer.status, 400);
    t.is(JSON.parse(answer.text).error.message, 'messages: text content blocks must be non-empty');
  });
}

test.serial("Messages passes through: the client's body goes to Vertex AI as it is, but for the model and the version, its beta header with it", async (t) => {
  mock.script(answering([{ type: 'text', text: 'Thought about it.' }]));
  const before = mock.calls.length;
  const fields = { system: 'Be brief.', thinking: { type: 'enabled', budget_tokens: 1024 }, metadata: { user_id: 'u-1' } };
  const answer = await call('messages', body('messages', 'claude', 'Hi', fields), { 'anthropic-beta': 'context-1m-2025-08-07' });
  t.is(answer.status, 200, answer.text);
  t.deepEqual(mock.calls[before]?.body, { max_tokens: 300, messages: [{ role: 'user', content: 'Hi' }], ...fields, anthropic_version: 'vertex-2023-10-16' });
  t.is(mock.calls[before]?.headers['anthropic-beta'], 'context-1m-2025-08-07');
  t.is(mock.calls[before]?.headers['anthropic-version'], undefined);
});

test.serial("Vertex AI's 429 RESOURCE_EXHAUSTED is a 429 retried on the next deployment, which cools down; alone, the client's 429", async (t) => {
  const exhausted = {
    status: 429,
    json: googleError(429, 'RESOURCE_EXHAUSTED', 'Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model'),
  };
  mock.script(({ model, body }) => (model === 'claude-first@1' ? exhausted : answering([{ type: 'text', text: 'From the spare.' }])({ body })));
  cooled.length = 0;
  const retried = await call('chat', body('chat', 'routed', 'Hi'));
  t.is(retried.status, 200, retried.text);
  t.is(retried.headers.get('x-kmg-deployment'), 'vertex-claude-spare');
  t.is(outcome('chat', retried.text, false).text, 'From the spare.');
  t.is(cooled.length, 1, 'the throttled deployment cools down');

  mock.script(() => exhausted);
  const refused = await call('messages', body('messages', 'claude', 'Hi'));
  t.is(refused.status, 429);
  t.like(JSON.parse(refused.text), { type: 'error', error: { type: 'rate_limit_error' } });
});

test.serial("a token Vertex AI refuses (401) is the gateway's failure, a 502, not the client's", async (t) => {
  const answer = await call('messages', body('messages', 'untokened', 'Hi'));
  t.is(answer.status, 502);
});

test.serial('count_tokens goes to count-tokens:rawPredict with the model in the body', async (t) => {
  mock.script(() => ({ json: { input_tokens: 14 } }));
  const before = mock.calls.length;
  const res = await gateway.post('/v1/messages/count_tokens', { model: 'claude', messages: [{ role: 'user', content: 'Hi' }] }, HEADERS.messages);
  t.deepEqual(await res.json(), { input_tokens: 14 });
  t.like(mock.calls[before], { model: 'count-tokens', method: 'rawPredict', body: { model: SONNET, anthropic_version: 'vertex-2023-10-16' } });
});

test("a Claude model on Vertex AI is priced from the maintained table by Vertex AI's name, its cache's reads and writes at their own prices", (t) => {
  t.deepEqual(unpriced, []);
  t.true(input > 0 && output > 0);
  t.true(cacheRead > 0 && cacheRead < input, 'reads from the cache cost less than input');
  t.true(cacheWrite > input, 'writes to the cache cost more than input');
});

test.serial("the anthropic SDK streams a Claude answer from Vertex AI through the gateway, with the cache's usage", async (t) => {
  mock.script(answering([{ type: 'text', text: 'Streamed.' }]));
  const anthropic = new Anthropic({ apiKey: key, baseURL: gateway.url, maxRetries: 0 });
  const answer = await anthropic.messages.stream({ model: 'claude', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
  t.is(answer.content.map((block) => (block.type === 'text' ? block.text : '')).join(''), 'Streamed.');
  t.like(answer.usage, { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 30, cache_creation_input_tokens: 20 });
});

test('a vertex-anthropic entry of a config file makes the provider, checked by its schema; traces name it gcp.vertex_ai', (t) => {
  const file = {
    providers: [{ id: 'claude-on-vertex', kind: 'vertex-anthropic', project: 'p', location: 'us-east5' }],
    models: [{ id: 'claude', provider: 'claude-on-vertex', upstreamModel: SONNET }],
  };
  const [made] = configuredProviders({ gateway: parseGatewayConfig(file, 'test'), env: {}, providerKinds: providerRegistry });
  t.is(made?.telemetry?.providerName, 'gcp.vertex_ai');
  t.is(made?.telemetry?.serverAddress, 'us-east5-aiplatform.googleapis.com');
  t.truthy(made?.messages && made.countTokens);
  t.is(made?.neutral, undefined, 'it speaks Messages: the other formats are translated to it');
  const withoutProject = { id: 'claude-on-vertex', kind: 'vertex-anthropic', location: 'us-east5' };
  t.throws(() => parseGatewayConfig({ ...file, providers: [withoutProject] }, 'test'), { message: /project/ });
});

test('without google-auth-library installed, both Vertex AI kinds are refused at start-up naming the package; given a token source, made', async (t) => {
  const script = `
    const { vertexProvider, vertexAnthropicProvider } = await import(${JSON.stringify(new URL('../../lib/models/providers/vertex/index.js', import.meta.url).href)});
    const options = { id: 'v', project: 'p', location: 'us-east5' };
    vertexAnthropicProvider({ ...options, auth: { getAccessToken: async () => 't' } });
    for (const make of [vertexProvider, vertexAnthropicProvider]) {
      try {
        make(options);
      } catch (err) {
        console.log(err.message);
      }
    }`;
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', new URL('../helpers/hide-packages.js', import.meta.url).href, '--input-type=module', '-e', script],
    { env: { ...process.env, KMG_TEST_HIDDEN_PACKAGES: 'google-auth-library' } },
  );
  t.deepEqual(stdout.trim().split('\n'), [
    'koa-model-gateway: vertexProvider(): needs the package google-auth-library (npm install google-auth-library)',
    'koa-model-gateway: vertexAnthropicProvider(): needs the package google-auth-library (npm install google-auth-library)',
  ]);
});
