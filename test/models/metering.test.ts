import test, { type ExecutionContext } from 'ava';
import { spendBudgets } from '../../lib/cost/budgets.js';
import { MemorySpendLedger } from '../../lib/stores/memory/spend-ledger.js';
import { errors, StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { createGatewayMetrics } from '../../lib/metrics/gateway-metrics.js';
import { modelsRouter, type ModelsRouterOptions } from '../../lib/models/models-router.js';
import { anthropicProvider } from '../../lib/models/providers/anthropic/index.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { MemoryModelLimiter } from '../../lib/stores/memory/model-limiter.js';
import type { ModelLimiter } from '../../lib/quota/model-limiter.js';
import type { ModelLimits } from '../../lib/quota/model-limits.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { usageRecorder } from '../../lib/usage/usage-recorder.js';
import { usageReport } from '../../lib/usage/usage-report.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { modelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { mockProviders, streamingUpstream } from '../helpers/models-upstream.js';
import { until } from '../helpers/poll.js';
import { parseMetrics, value } from '../helpers/prometheus.js';
import { testClock } from '../../lib/testing/creation-limiter-contract.js';

const CATALOG = [
  { id: 'gpt-mock', provider: 'openai', upstreamModel: 'gpt-upstream-1' },
  { id: 'claude-mock', provider: 'anthropic', upstreamModel: 'claude-upstream-1' },
];

/**
 * The models API in front of a mock OpenAI and Anthropic, metered into a memory usage store and
 * a metrics registry, limited by a memory limiter on a clock stopped in the middle of a minute.
 */
async function meteredGateway(t: ExecutionContext, options: Partial<ModelsRouterOptions> = {}) {
  const upstream = await mockProviders();
  const store = new MemoryUsageStore();
  const recorder = usageRecorder({ store });
  const records: UsageRecord[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const metrics = createGatewayMetrics();
  const gateway = await modelsApp({
    catalog: CATALOG,
    providers: [openAIProvider({ id: 'openai', baseURL: `${upstream.url}/v1` }), anthropicProvider({ id: 'anthropic', baseURL: upstream.url })],
    modelLimiter: new MemoryModelLimiter({ nowMs: testClock('2030-01-15T12:00:30.000Z').nowMs }),
    metrics,
    // Every record is kept here too, so that a test can wait for one: a call is recorded when its
    // response has closed on the server, which may come after the client has read it.
    usageRecorder: {
      record(record) {
        recorder.record(record);
        records.push(record);
        for (const waiter of waiters.filter(({ count }) => records.length >= count)) waiter.resolve();
      },
    },
    ...options,
  });
  t.teardown(async () => {
    await gateway.close();
    await upstream.close();
    await recorder.close();
  });
  const key = (limits: ModelLimits = {}, extra: { models?: string[] } = {}) => gateway.keyFor(undefined, { ...extra, limits });
  return {
    ...gateway,
    upstream,
    store,
    metrics,
    key,
    chat: (apiKey: string, body: Record<string, unknown>) =>
      gateway.post('/v1/chat/completions', { model: 'gpt-mock', messages: [{ role: 'user', content: 'hi' }], ...body }, { authorization: `Bearer ${apiKey}` }),
    responses: (apiKey: string, body: Record<string, unknown>) =>
      gateway.post('/v1/responses', { model: 'gpt-mock', input: 'hi', ...body }, { authorization: `Bearer ${apiKey}` }),
    countTokens: (apiKey: string, body: Record<string, unknown>) =>
      gateway.post('/v1/messages/count_tokens', { model: 'claude-mock', messages: [{ role: 'user', content: 'hi' }], ...body }, { 'x-api-key': apiKey }),
    messages: (apiKey: string, body: Record<string, unknown>) =>
      gateway.post('/v1/messages', { model: 'claude-mock', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], ...body }, { 'x-api-key': apiKey }),
    /** The first `count` usage records, once they are there. */
    async records(count: number): Promise<UsageRecord[]> {
      if (records.length < count) await new Promise<void>((resolve) => waiters.push({ count, resolve }));
      return records.slice(0, count);
    },
    async report() {
      await recorder.flush();
      return usageReport(store, { by: 'model' });
    },
    async samples() {
      return parseMetrics(await metrics.registry.metrics());
    },
  };
}

/** The JSON objects of a Chat Completions stream's `data:` lines, `[DONE]` left out. */
function chunksOf(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n\n')
    .filter((event) => event.startsWith('data: {'))
    .map((event) => JSON.parse(event.slice('data: '.length)) as Record<string, unknown>);
}

/** The events of a Messages stream, by name. */
function eventsOf(text: string): Array<{ name: string; data: Record<string, unknown> }> {
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((event) => {
      const [name, data] = event.split('\n');
      return { name: (name ?? '').slice('event: '.length), data: JSON.parse((data ?? '').slice('data: '.length)) as Record<string, unknown> };
    });
}

const sum = (values: number[]) => values.reduce((total, each) => total + each, 0);

test("usage of both endpoints, streamed or not, is the upstream's own, call by call and in total", async (t) => {
  const gateway = await meteredGateway(t);
  const key = await gateway.key();
  const answers = [
    await gateway.chat(key, {}),
    await gateway.chat(key, { stream: true }),
    await gateway.chat(key, { stream: true, stream_options: { include_usage: true } }),
    await gateway.messages(key, {}),
    await gateway.messages(key, { stream: true }),
  ];
  for (const answer of answers) {
    t.is(answer.status, 200);
    await answer.text();
  }
  const records = await gateway.records(answers.length);
  const { calls } = gateway.upstream;
  t.deepEqual(
    records.map((record) => [record.endpoint, record.model, record.provider, record.status, record.stream, record.inputTokens, record.outputTokens]),
    calls.map((call, index) => [
      call.path,
      call.path === '/v1/messages' ? 'claude-mock' : 'gpt-mock',
      call.path === '/v1/messages' ? 'anthropic' : 'openai',
      200,
      [1, 2, 4].includes(index),
      call.usage.input,
      call.usage.output,
    ]),
  );
  for (const record of records) {
    t.like(record, { account: 'acme', attachments: 0 });
    t.regex(record.requestId, /^req_[A-Za-z0-9]{32}$/);
    const { upstreamFirstByteMs: firstByte, upstreamMs: upstream } = record;
    t.true(firstByte !== null && upstream !== null && firstByte <= upstream && upstream <= record.latencyMs, JSON.stringify(record));
  }
  // The catalog here gives no price: the calls cost 0.
  const totals = {
    requests: 5,
    answered: 5,
    refused: 0,
    inputTokens: sum(calls.map((call) => call.usage.input)),
    outputTokens: sum(calls.map((call) => call.usage.output)),
    costUsd: 0,
    cacheHits: 0,
    costSavedUsd: 0,
  };
  t.deepEqual((await gateway.report()).totals, totals);
  const samples = await gateway.samples();
  t.is(sum(['gpt-mock', 'claude-mock'].map((model) => value(samples, 'kmg_model_tokens_total', { model, direction: 'input' }) ?? 0)), totals.inputTokens);
  t.is(value(samples, 'kmg_upstream_duration_seconds_count', { provider: 'anthropic', model: 'claude-mock' }), 2);
  t.is(value(samples, 'kmg_upstream_time_to_first_byte_seconds_count', { provider: 'openai', model: 'gpt-mock' }), 3);
});

test('a Chat Completions stream: usage is always asked upstream; a client that did not ask gets no usage, one that did gets the chunk', async (t) => {
  const gateway = await meteredGateway(t);
  const key = await gateway.key();
  const without = chunksOf(await (await gateway.chat(key, { stream: true })).text());
  const asked = chunksOf(await (await gateway.chat(key, { stream: true, stream_options: { include_usage: true } })).text());
  t.deepEqual(
    gateway.upstream.calls.map((call) => call.body.stream_options),
    [{ include_usage: true }, { include_usage: true }],
  );
  t.is(without.length, 3);
  t.false(
    without.some((chunk) => 'usage' in chunk),
    'neither the usage chunk nor the usage: null of the others',
  );
  t.is(asked.length, 4);
  const usage = gateway.upstream.calls[1]?.usage;
  t.deepEqual(asked.at(-1), {
    id: 'chatcmpl-mock',
    created: 1_744_000_000,
    model: 'gpt-mock',
    object: 'chat.completion.chunk',
    choices: [],
    usage: { prompt_tokens: usage?.input, completion_tokens: usage?.output, total_tokens: (usage?.input ?? 0) + (usage?.output ?? 0) },
  });
});

test('answers name the catalog id the client asked for, never the upstream model, in JSON and in every streamed event', async (t) => {
  const gateway = await meteredGateway(t);
  const key = await gateway.key();
  t.is(((await (await gateway.chat(key, {})).json()) as { model: string }).model, 'gpt-mock');
  t.is(((await (await gateway.messages(key, {})).json()) as { model: string }).model, 'claude-mock');
  const chunks = chunksOf(await (await gateway.chat(key, { stream: true, stream_options: { include_usage: true } })).text());
  t.deepEqual(new Set(chunks.map((chunk) => chunk.model)), new Set(['gpt-mock']));
  const events = eventsOf(await (await gateway.messages(key, { stream: true })).text());
  t.is((events[0]!.data.message as { model: string }).model, 'claude-mock');
  t.deepEqual(
    gateway.upstream.calls.map((call) => call.body.model),
    ['gpt-upstream-1', 'claude-upstream-1', 'gpt-upstream-1', 'claude-upstream-1'],
  );
});

test('Responses: usage from the response object, whole or from response.completed; the catalog id in the JSON answer and in every response.* event', async (t) => {
  const gateway = await meteredGateway(t);
  const key = await gateway.key({ requestsPerMinute: 10 });
  const whole = await gateway.responses(key, {});
  t.is(whole.status, 200);
  t.is(whole.headers.get('x-ratelimit-remaining-requests'), '9');
  t.like(await whole.json(), { object: 'response', model: 'gpt-mock' });
  const streamed = await gateway.responses(key, { stream: true });
  t.is(streamed.headers.get('x-ratelimit-remaining-requests'), '8');
  const events = eventsOf(await streamed.text());
  t.deepEqual(
    events.map(({ name, data }) => [name, (data.response as { model?: string } | undefined)?.model]),
    [
      ['response.created', 'gpt-mock'],
      ['response.in_progress', 'gpt-mock'],
      ['response.output_text.delta', undefined],
      ['response.completed', 'gpt-mock'],
    ],
  );
  t.deepEqual(
    gateway.upstream.calls.map((call) => call.body.model),
    ['gpt-upstream-1', 'gpt-upstream-1'],
  );
  const records = await gateway.records(2);
  t.deepEqual(
    records.map((record) => [record.endpoint, record.model, record.stream, record.inputTokens, record.outputTokens]),
    gateway.upstream.calls.map((call, index) => ['/v1/responses', 'gpt-mock', index === 1, call.usage.input, call.usage.output]),
  );
  t.is(
    value(await gateway.samples(), 'kmg_model_tokens_total', { model: 'gpt-mock', direction: 'output' }),
    sum(gateway.upstream.calls.map((call) => call.usage.output)),
  );
});

test('count_tokens is a model call: limited in Anthropic’s style and recorded, with no tokens (its answer counts none used)', async (t) => {
  const gateway = await meteredGateway(t);
  const key = await gateway.key({ requestsPerMinute: 1, tokensPerMinute: 100 });
  const counted = await gateway.countTokens(key, {});
  t.is(counted.status, 200);
  t.is(counted.headers.get('anthropic-ratelimit-requests-remaining'), '0');
  t.deepEqual(await counted.json(), { input_tokens: gateway.upstream.calls[0]?.usage.input });
  const refused = await gateway.countTokens(key, {});
  t.is(refused.status, 429);
  t.like(await refused.json(), { type: 'error', error: { type: 'rate_limit_error' } });
  t.is(refused.headers.get('anthropic-ratelimit-tokens-remaining'), '100', 'the count added no tokens');
  t.is(gateway.upstream.calls.length, 1);
  const records = await gateway.records(2);
  t.deepEqual(
    records.map((record) => [record.endpoint, record.model, record.status, record.inputTokens, record.outputTokens]),
    [
      ['/v1/messages/count_tokens', 'claude-mock', 200, 0, 0],
      ['/v1/messages/count_tokens', 'claude-mock', 429, 0, 0],
    ],
  );
});

test('requests per minute: every endpoint counts; over the limit, a 429 in the endpoint’s shape with the headers, nothing sent upstream, the refusal recorded', async (t) => {
  const gateway = await meteredGateway(t);
  const key = await gateway.key({ requestsPerMinute: 2 });
  const first = await gateway.chat(key, {});
  t.is(first.status, 200);
  t.is(first.headers.get('x-ratelimit-limit-requests'), '2');
  t.is(first.headers.get('x-ratelimit-remaining-requests'), '1');
  t.is(first.headers.get('x-ratelimit-reset-requests'), '30s');
  const second = await gateway.messages(key, { stream: true });
  t.is(second.status, 200);
  t.is(second.headers.get('anthropic-ratelimit-requests-remaining'), '0');
  await second.text();

  const refusedChat = await gateway.chat(key, { stream: true });
  t.is(refusedChat.status, 429);
  t.deepEqual(await refusedChat.json(), {
    error: { message: 'Rate limit exceeded: requests per minute', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' },
  });
  t.is(refusedChat.headers.get('retry-after'), '30');
  t.is(refusedChat.headers.get('x-ratelimit-limit-requests'), '2');
  t.is(refusedChat.headers.get('x-ratelimit-remaining-requests'), '0');
  const refusedMessages = await gateway.messages(key, {});
  t.is(refusedMessages.status, 429);
  t.like(await refusedMessages.json(), { type: 'error', error: { type: 'rate_limit_error', message: 'Rate limit exceeded: requests per minute' } });
  t.is(refusedMessages.headers.get('retry-after'), '30');
  t.is(refusedMessages.headers.get('anthropic-ratelimit-requests-limit'), '2');
  t.is(refusedMessages.headers.get('anthropic-ratelimit-requests-reset'), '2030-01-15T12:01:00Z');

  t.is(gateway.upstream.calls.length, 2, 'the refused calls sent nothing upstream');
  const refusals = (await gateway.records(4)).slice(2);
  for (const record of refusals) t.like(record, { status: 429, inputTokens: 0, outputTokens: 0, upstreamMs: null, upstreamFirstByteMs: null });
  t.deepEqual(
    refusals.map((record) => [record.endpoint, record.model, record.stream]),
    [
      ['/v1/chat/completions', 'gpt-mock', true],
      ['/v1/messages', 'claude-mock', false],
    ],
  );
  t.is(value(await gateway.samples(), 'kmg_limit_refusals_total', { kind: 'requests' }), 2);
});

test('tokens are counted when an answer ends, streamed ones too; the window full, the next call is refused naming tokens', async (t) => {
  const gateway = await meteredGateway(t);
  const key = await gateway.key({ tokensPerMinute: 20, tokensPerDay: 1000 });
  const streamed = await gateway.messages(key, { stream: true });
  t.is(streamed.headers.get('anthropic-ratelimit-tokens-remaining'), '20');
  await streamed.text();
  await gateway.records(1);
  const [call] = gateway.upstream.calls;
  const used = (call?.usage.input ?? 0) + (call?.usage.output ?? 0);
  t.true(used >= 15 && used < 20, 'the mock upstream reports 15 to 19 tokens for the first call');
  const second = await gateway.chat(key, {});
  t.is(second.status, 200);
  t.is(second.headers.get('x-ratelimit-remaining-tokens'), String(20 - used));
  await second.text();
  await gateway.records(2);
  const refused = await gateway.chat(key, {});
  t.is(refused.status, 429);
  t.like(await refused.json(), { error: { message: 'Rate limit exceeded: tokens per minute', code: 'rate_limit_exceeded' } });
  t.is(refused.headers.get('x-ratelimit-remaining-tokens'), '0');
  t.is(value(await gateway.samples(), 'kmg_limit_refusals_total', { kind: 'tokens' }), 1);
});

test("modelLimits are every key's limits; a key's own limits override them field by field", async (t) => {
  const gateway = await meteredGateway(t, { modelLimits: { requestsPerMinute: 1, tokensPerDay: 1_000_000 } });
  const plain = await gateway.key();
  const own = await gateway.key({ requestsPerMinute: 3 });
  const parallel = await Promise.all([1, 2].map(async () => (await gateway.chat(plain, {})).status));
  t.deepEqual(parallel.sort(), [200, 429]);
  const statuses: number[] = [];
  for (let call = 0; call < 4; call += 1) {
    const answer = await gateway.chat(own, {});
    statuses.push(answer.status);
    if (call === 0) t.is(answer.headers.get('x-ratelimit-limit-tokens'), '1000000', "the default's tokens per day");
  }
  t.deepEqual(statuses, [200, 200, 200, 429]);
});

test('check order: a key over its limits still gets 403, 400 and 404 first; those refusals are recorded and count nothing', async (t) => {
  const gateway = await meteredGateway(t);
  const key = await gateway.key({ requestsPerMinute: 1 }, { models: ['gpt-mock', 'claude-mock'] });
  t.is((await gateway.chat(key, {})).status, 200);
  const noChatScope = await gateway.keyFor(['messages:create']);
  const fileId = await gateway.storePdf(makePdf(1), { account: 'elsewhere' });
  const answers = [
    await gateway.chat(noChatScope, {}),
    await gateway.chat(key, { model: 'gpt-other' }),
    await gateway.chat(key, { messages: 'not a list', model: 42 }),
    await gateway.messages(key, { model: 'claude-other' }),
    await gateway.chat(key, { messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: fileId } }] }] }),
    await gateway.chat(key, {}),
  ];
  t.deepEqual(
    answers.map((answer) => answer.status),
    [403, 403, 400, 404, 404, 429],
  );
  t.is(gateway.upstream.calls.length, 1);
  const records = await gateway.records(7);
  t.deepEqual(
    records.map((record) => [record.status, record.model]),
    [
      [200, 'gpt-mock'],
      [403, null],
      [403, null],
      [400, null],
      [404, null],
      [404, 'gpt-mock'],
      [429, 'gpt-mock'],
    ],
    'a model is recorded once it is resolved: never a name the client made up',
  );
});

test('a client that leaves mid-stream: the call is recorded as 499 with the usage read so far, once the upstream call has ended', async (t) => {
  const hanging = await streamingUpstream();
  t.teardown(() => hanging.close());
  const gateway = await meteredGateway(t, { providers: [anthropicProvider({ id: 'anthropic', baseURL: hanging.url }), openAIProvider({ id: 'openai' })] });
  const controller = new AbortController();
  // The answer's status and headers go with its first event.
  const answering = gateway.post(
    '/v1/messages',
    { model: 'claude-mock', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'hi' }] },
    { 'x-api-key': await gateway.key() },
    controller.signal,
  );
  const upstream = await hanging.next();
  upstream.res.write(
    'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-upstream-1","usage":{"input_tokens":7,"output_tokens":1}}}\n\n',
  );
  const answer = await answering;
  const reader = (answer.body as ReadableStream<Uint8Array>).getReader();
  t.regex(new TextDecoder().decode((await reader.read()).value), /"model":"claude-mock"/);
  controller.abort();
  const [record] = await gateway.records(1);
  t.like(record, { status: 499, stream: true, inputTokens: 7, outputTokens: 1 });
  t.true(record?.upstreamMs !== null && record?.upstreamMs !== undefined);
});

// 1 and 2 USD per million tokens: 1,000,000 and 2,000,000 picodollars a token.
const PRICED = [
  { id: 'gpt-mock', provider: 'openai', upstreamModel: 'gpt-upstream-1', price: { input: 1, output: 2 } },
  { id: 'claude-mock', provider: 'anthropic', upstreamModel: 'claude-upstream-1', price: { input: 1, output: 2 } },
];

/**
 * A native stream cut after the upstream's `events`, which end before any usage of the rest is
 * told: by the client leaving, or by the upstream ending its stream without its last event, or
 * resetting the connection. The call's record, what the client got, and what its account's budget
 * was charged once the call's reservation was released.
 */
async function cutStream(t: ExecutionContext, path: string, body: Record<string, unknown>, events: string, by: 'client' | 'end' | 'reset' = 'client') {
  const hanging = await streamingUpstream();
  t.teardown(() => hanging.close());
  const providers = [openAIProvider({ id: 'openai', baseURL: `${hanging.url}/v1` }), anthropicProvider({ id: 'anthropic', baseURL: hanging.url })];
  // The account's budget: what the call left is charged against it, its reservation released.
  const ledger = new MemorySpendLedger();
  const gateway = await meteredGateway(t, {
    providers,
    catalog: PRICED,
    budgets: spendBudgets({ ledger, accounts: { get: async () => ({ costPerDay: 1 }) } }),
  });
  const key = await gateway.key();
  const controller = new AbortController();
  const auth = path === '/v1/messages' ? { 'x-api-key': key } : { authorization: `Bearer ${key}` };
  const answering = gateway.post(path, { ...body, stream: true }, auth, controller.signal);
  const upstream = await hanging.next();
  upstream.res.write(events);
  const reader = ((await answering).body as ReadableStream<Uint8Array>).getReader();
  let text = '';
  while (!text.includes('"!"')) text += new TextDecoder().decode((await reader.read()).value);
  if (by === 'client') controller.abort();
  else {
    if (by === 'end') upstream.res.end();
    else upstream.res.destroy();
    for (let read = await reader.read(); !read.done; read = await reader.read()) text += new TextDecoder().decode(read.value);
  }
  const [record] = await gateway.records(1);
  const { spend } = await until(
    () => ledger.spent(['account:acme']),
    ({ held }) => held[0] === 0n,
  );
  return { record, text, charged: spend[0]?.day };
}

const say = 'An answer of just forty characters, okay';
const chatChunk = (delta: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-upstream-1', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
const chatCall = { model: 'gpt-mock', messages: [{ role: 'user', content: 'Count the words of this sentence.' }] };
const messagesEvents = [
  'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-upstream-1","usage":{"input_tokens":7,"output_tokens":1}}}\n\n',
  `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: say } })}\n\n`,
  'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}\n\n',
].join('');
const messagesCall = { model: 'claude-mock', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const responsesEvent = (type: string, fields: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`;
const responsesEvents =
  responsesEvent('response.created', { response: { id: 'resp_1', object: 'response', model: 'gpt-upstream-1', status: 'in_progress', output: [] } }) +
  responsesEvent('response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta: say }) +
  responsesEvent('response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta: '!' });
const responsesCall = { model: 'gpt-mock', input: 'Count the words of this sentence.' };

test('a client that leaves a Chat Completions stream before its usage is charged for the request and the text it got, estimated', async (t) => {
  const { record, charged } = await cutStream(
    t,
    '/v1/chat/completions',
    chatCall,
    chatChunk({ role: 'assistant', content: say }) + chatChunk({ content: '!' }),
  );
  // 33 characters asked, 41 answered (the 40 of `say` and a "!"): four characters a token, rounded up.
  t.like(record, { status: 499, stream: true, inputTokens: 9, outputTokens: 11, costPicoUsd: 9 * 1_000_000 + 11 * 2_000_000 });
  t.is(charged, BigInt(9 * 1_000_000 + 11 * 2_000_000), 'the budget is charged what the call cost');
});

test("a client that leaves a Messages stream is charged for the upstream's input count and the text it got, estimated", async (t) => {
  const { record, charged } = await cutStream(t, '/v1/messages', messagesCall, messagesEvents);
  t.like(record, { status: 499, inputTokens: 7, outputTokens: 11, costPicoUsd: 7 * 1_000_000 + 11 * 2_000_000 });
  t.is(charged, BigInt(7 * 1_000_000 + 11 * 2_000_000));
});

test('a client that leaves a Responses stream is charged for the request and the text it got, estimated', async (t) => {
  const { record, charged } = await cutStream(t, '/v1/responses', responsesCall, responsesEvents);
  t.like(record, { status: 499, inputTokens: 9, outputTokens: 11 });
  t.is(charged, BigInt(record?.costPicoUsd ?? -1));
});

const CUT_ERROR_EVENTS: Record<string, RegExp> = {
  '/v1/chat/completions': /data: \{"error":\{"message":"Upstream provider error","type":"server_error","param":null,"code":"upstream_error"\}\}\n\n$/,
  '/v1/messages': /event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"Upstream provider error"\}.*\n\n$/,
  '/v1/responses': /event: error\ndata: \{"type":"error","code":"upstream_error","message":"Upstream provider error".*\n\n$/,
};

for (const by of ['end', 'reset'] as const) {
  const how = by === 'end' ? 'ended without its last event' : 'reset';
  test(`a Chat Completions stream the upstream ${how}: the client gets the error event, the call is charged for the request and the text relayed`, async (t) => {
    const { record, text, charged } = await cutStream(
      t,
      '/v1/chat/completions',
      chatCall,
      chatChunk({ role: 'assistant', content: say }) + chatChunk({ content: '!' }),
      by,
    );
    t.regex(text, CUT_ERROR_EVENTS['/v1/chat/completions'] as RegExp);
    t.like(record, { stream: true, inputTokens: 9, outputTokens: 11, costPicoUsd: 9 * 1_000_000 + 11 * 2_000_000 });
    t.is(charged, BigInt(9 * 1_000_000 + 11 * 2_000_000), 'the budget is charged what the call cost');
  });

  test(`a Messages stream the upstream ${how}: the client gets the error event, the call is charged for the upstream's input count and the text relayed`, async (t) => {
    const { record, text } = await cutStream(t, '/v1/messages', messagesCall, messagesEvents, by);
    t.regex(text, CUT_ERROR_EVENTS['/v1/messages'] as RegExp);
    t.like(record, { inputTokens: 7, outputTokens: 11, costPicoUsd: 7 * 1_000_000 + 11 * 2_000_000 });
  });

  test(`a Responses stream the upstream ${how}: the client gets the error event, the call is charged for the request and the text relayed`, async (t) => {
    const { record, text } = await cutStream(t, '/v1/responses', responsesCall, responsesEvents, by);
    t.regex(text, CUT_ERROR_EVENTS['/v1/responses'] as RegExp);
    t.like(record, { inputTokens: 9, outputTokens: 11 });
  });
}

test('a limiter that cannot answer fails the call closed: 503, nothing sent upstream', async (t) => {
  const down: ModelLimiter = {
    consume: async () => Promise.reject(new StoreUnavailableError('redis is away')),
    addTokens: async () => undefined,
    usage: async () => ({ requestsThisMinute: 0, tokensThisMinute: 0, tokensToday: 0 }),
  };
  const gateway = await meteredGateway(t, { modelLimiter: down });
  const key = await gateway.key();
  const chat = await gateway.chat(key, {});
  t.is(chat.status, 503);
  t.like(await chat.json(), { error: { code: 'service_unavailable' } });
  t.is((await gateway.messages(key, {})).status, 503);
  t.is(gateway.upstream.calls.length, 0);
});

test('a limiter failing to count tokens is reported; the answer is not held up', async (t) => {
  const limiter = new MemoryModelLimiter();
  limiter.addTokens = async () => Promise.reject(errors.serviceUnavailable());
  const gateway = await meteredGateway(t, { modelLimiter: limiter });
  const answer = await gateway.chat(await gateway.key({ tokensPerDay: 100 }), {});
  t.is(answer.status, 200);
  await gateway.records(1);
  t.true(gateway.reported.some((err) => err instanceof Error && err.message === 'Service temporarily unavailable'));
});

test('modelLimits and modelLimiter are checked when the router is made', (t) => {
  const options = { catalog: [], providers: [] };
  t.throws(() => modelsRouter({ ...options, modelLimits: { requestsPerMinute: 0 } }), {
    message: 'koa-model-gateway: chatCompletions(): modelLimits.requestsPerMinute must be a positive integer',
  });
  t.throws(() => modelsRouter({ ...options, modelLimits: { tokensPerDay: 1.5 } }), { message: /modelLimits\.tokensPerDay must be a positive integer$/ });
  t.throws(() => modelsRouter({ ...options, modelLimiter: {} as ModelLimiter }), { message: /modelLimiter must be a ModelLimiter/ });
});
