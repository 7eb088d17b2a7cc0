import test from 'ava';
import { SCOPES } from '../../lib/auth/scopes.js';
import { spendBudgets } from '../../lib/cost/budgets.js';
import { MemorySpendLedger } from '../../lib/stores/memory/spend-ledger.js';
import { priceCatalog } from '../../lib/cost/price-table.js';
import { MemoryModelLimiter } from '../../lib/stores/memory/model-limiter.js';
import { testClock } from '../../lib/testing/creation-limiter-contract.js';
import { createGatewayMetrics } from '../../lib/metrics/gateway-metrics.js';
import type { CatalogModel } from '../../lib/models/catalog.js';
import type { EmbedRequest, Provider } from '../../lib/models/provider.js';
import { echoProvider } from '../../lib/models/providers/echo/index.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { modelsApp, OPENAI_PROVIDER_KEY, type ModelsApp } from '../helpers/models-app.js';
import { reply, scriptedUpstream, type ScriptedUpstream } from '../helpers/models-upstream.js';
import { openAIProblems } from '../helpers/openai-schemas.js';
import { parseMetrics, value } from '../helpers/prometheus.js';
import { until } from '../helpers/poll.js';

// POST /v1/embeddings in front of echo, a mock OpenAI and a neutral provider with a per-call limit.

let upstream: ScriptedUpstream;
let gateway: ModelsApp;
let key: string;
const embedCalls: EmbedRequest[] = [];
/** A provider of the neutral operation only, two inputs a call: each vector is [its input's position in the call, its length]. */
const neutral: Provider = {
  id: 'neutral',
  embeddingInputsPerCall: 2,
  embed: async (request) => {
    embedCalls.push(request);
    return { vectors: request.inputs.map((input, at) => Float32Array.of(at, input.length)), inputTokens: request.inputs.length * 3 };
  },
};
const CATALOG: CatalogModel[] = [
  { id: 'echo-embed', provider: 'echo', type: 'embeddings', price: { input: 1, output: 0 } },
  { id: 'echo-chat', provider: 'echo' },
  { id: 'openai-embed', provider: 'openai', upstreamModel: 'text-embedding-3-small', type: 'embeddings' },
  // OpenAI's API, two inputs a call: a longer batch is split.
  { id: 'openai-embed-split', provider: 'openai-split', upstreamModel: 'text-embedding-3-small', type: 'embeddings' },
  { id: 'neutral-embed', provider: 'neutral', upstreamModel: 'neutral-upstream', type: 'embeddings' },
];
// Limits and budgets count on a clock that stands still: no test straddles two minutes or days.
const STILL_CLOCK = testClock('2030-01-15T12:00:30.000Z').nowMs;
const records: UsageRecord[] = [];
const metrics = createGatewayMetrics();
test.before(async () => {
  upstream = await scriptedUpstream();
  const openai = openAIProvider({ id: 'openai', baseURL: `${upstream.url}/v1`, apiKey: OPENAI_PROVIDER_KEY });
  gateway = await modelsApp({
    catalog: CATALOG,
    providers: [echoProvider({ id: 'echo' }), openai, { ...openai, id: 'openai-split', embeddingInputsPerCall: 2 }, neutral],
    usageRecorder: { record: (record) => void records.push(record) },
    metrics,
    modelLimiter: new MemoryModelLimiter({ nowMs: STILL_CLOCK }),
  });
  key = await gateway.keyFor();
});
test.after.always(() => Promise.all([gateway?.close(), upstream?.close()]));

/** An answer of /v1/embeddings: a list of embeddings (floats or, asked, base64), or an error. */
interface Answer {
  object: string;
  model: string;
  data: Array<{ object: string; index: number; embedding: number[] | string }>;
  usage: { prompt_tokens: number; total_tokens: number };
  error: { message: string; type: string; code: string | null };
}
const embed = async (body: Record<string, unknown>, apiKey = key) => {
  const res = await gateway.post('/v1/embeddings', body, { authorization: `Bearer ${apiKey}` });
  return { status: res.status, body: (await res.json()) as Answer };
};

/** The float32 values of OpenAI's base64 encoding of a vector. */
const decoded = (base64: string) => {
  const bytes = Buffer.from(base64, 'base64');
  return Array.from({ length: bytes.length / 4 }, (_, at) => bytes.readFloatLE(at * 4));
};

test('echo: floats and base64 of the same vectors, one per input in order, OpenAI-shaped, named as asked, dimensions honoured', async (t) => {
  const floats = await embed({ model: 'echo-embed', input: ['the quick fox', 'a lazy dog', 'the quick fox'], dimensions: 12 });
  t.is(floats.status, 200);
  t.deepEqual(openAIProblems('CreateEmbeddingResponse', floats.body), []);
  t.like(floats.body, { object: 'list', model: 'echo-embed', usage: { prompt_tokens: 9, total_tokens: 9 } });
  const vectors = floats.body.data.map((item, at) => {
    t.is(item.index, at);
    t.is(item.embedding.length, 12);
    return item.embedding as number[];
  });
  t.deepEqual(vectors[0], vectors[2], 'the same input, the same vector');
  t.notDeepEqual(vectors[0], vectors[1]);
  t.true(Math.abs(Math.hypot(...vectors[0]!) - 1) < 1e-6, 'a unit vector');

  const base64 = await embed({ model: 'echo-embed', input: ['the quick fox', 'a lazy dog', 'the quick fox'], dimensions: 12, encoding_format: 'base64' });
  t.is(base64.status, 200);
  t.deepEqual(
    base64.body.data.map((item) => decoded(item.embedding as string)),
    vectors,
  );

  const tokens = await embed({ model: 'echo-embed', input: [[1, 2, 3], [4]] });
  t.deepEqual(
    tokens.body.data.map((item) => item.embedding.length),
    [256, 256],
  );
  t.like(tokens.body, { usage: { prompt_tokens: 4 } });
});

test('bad input is a Shape A 400 naming the field', async (t) => {
  const bodies: Array<[Record<string, unknown>, RegExp]> = [
    [{ model: 'echo-embed' }, /'input'/],
    [{ model: 'echo-embed', input: '' }, /'input'/],
    [{ model: 'echo-embed', input: [] }, /'input'/],
    [{ model: 'echo-embed', input: ['a', 1] }, /'input'/],
    [{ model: 'echo-embed', input: [[1, -2]] }, /'input'/],
    [{ model: 'echo-embed', input: Array.from({ length: 2049 }, () => 'a') }, /'input' may hold at most 2048/],
    [{ model: 'echo-embed', input: 'a', encoding_format: 'hex' }, /'encoding_format'/],
    [{ model: 'echo-embed', input: 'a', dimensions: 0 }, /'dimensions'/],
    [{ model: 'echo-embed', input: 'a', user: 7 }, /'user'/],
    [{ model: 'echo-embed', input: 'a', stream: true }, /'stream'/],
    [{ input: 'a' }, /'model'/],
  ];
  for (const [body, message] of bodies) {
    const answer = await embed(body);
    t.is(answer.status, 400, JSON.stringify(body).slice(0, 80));
    t.deepEqual(openAIProblems('ErrorResponse', answer.body), []);
    t.like(answer.body.error, { type: 'invalid_request_error' });
    t.regex(answer.body.error.message, message);
  }
});

test('a model serves either the chat endpoints or /v1/embeddings: the other is a 400 naming it; the scope, the allowlist and unknown models as for chat', async (t) => {
  const chatModel = await embed({ model: 'echo-chat', input: 'a' });
  t.is(chatModel.status, 400);
  t.regex(chatModel.body.error.message, /'echo-chat' is not an embeddings model/);
  const messages = [{ role: 'user', content: 'hi' }];
  const chats: Array<[string, Record<string, unknown>, Record<string, string>]> = [
    ['/v1/chat/completions', { model: 'echo-embed', messages }, {}],
    ['/v1/responses', { model: 'echo-embed', input: 'hi' }, {}],
    ['/v1/messages', { model: 'echo-embed', max_tokens: 10, messages }, { 'anthropic-version': '2023-06-01' }],
    ['/v1/messages/count_tokens', { model: 'echo-embed', messages }, { 'anthropic-version': '2023-06-01' }],
  ];
  for (const [path, body, headers] of chats) {
    const res = await gateway.post(path, body, { authorization: `Bearer ${key}`, ...headers });
    t.is(res.status, 400, path);
    t.regex(((await res.json()) as { error: { message: string } }).error.message, /'echo-embed' is an embeddings model/);
  }

  t.is((await embed({ model: 'echo-embed', input: 'a' }, await gateway.keyFor(SCOPES.filter((scope) => scope !== 'embeddings:create')))).status, 403);
  const outside = await embed({ model: 'echo-embed', input: 'a' }, await gateway.keyFor(undefined, { models: ['echo-chat'] }));
  t.is(outside.status, 403);
  t.regex(outside.body.error.message, /Model 'echo-embed' is not allowed/);
  t.like(await embed({ model: 'nope', input: 'a' }), { status: 404, body: { error: { code: 'model_not_found' } } });
});

test('openai: the body passes through as it is, the answer comes back renamed; a batch over the per-call limit is split, joined in order, usage summed', async (t) => {
  const data = (count: number, from: number) => Array.from({ length: count }, (_, at) => ({ object: 'embedding', index: at, embedding: [from + at, 0.5] }));
  upstream.answer(
    '/v1/embeddings',
    reply(200, { object: 'list', data: data(1, 0), model: 'text-embedding-3-small', usage: { prompt_tokens: 5, total_tokens: 5 } }),
  );
  const body = { model: 'openai-embed', input: 'one text', encoding_format: 'float', dimensions: 2, user: 'u-1' };
  const passed = await embed(body);
  t.deepEqual(passed.body, { object: 'list', data: data(1, 0), model: 'openai-embed', usage: { prompt_tokens: 5, total_tokens: 5 } });
  const sent = upstream.received.at(-1);
  t.deepEqual(sent?.body, { ...body, model: 'text-embedding-3-small' });
  t.is(sent?.headers.authorization, `Bearer ${OPENAI_PROVIDER_KEY}`);

  upstream.answer(
    '/v1/embeddings',
    reply(200, { object: 'list', data: data(2, 0), model: 'text-embedding-3-small', usage: { prompt_tokens: 4, total_tokens: 4 } }),
  );
  upstream.answer(
    '/v1/embeddings',
    reply(200, { object: 'list', data: data(2, 2), model: 'text-embedding-3-small', usage: { prompt_tokens: 6, total_tokens: 6 } }),
  );
  upstream.answer(
    '/v1/embeddings',
    reply(200, { object: 'list', data: data(1, 4), model: 'text-embedding-3-small', usage: { prompt_tokens: 1, total_tokens: 1 } }),
  );
  const before = upstream.received.length;
  const split = await embed({ model: 'openai-embed-split', input: ['a', 'b', 'c', 'd', 'e'] });
  t.deepEqual(
    upstream.received.slice(before).map((request) => request.body.input),
    [['a', 'b'], ['c', 'd'], ['e']],
  );
  t.deepEqual(split.body, { object: 'list', data: data(5, 0), model: 'openai-embed-split', usage: { prompt_tokens: 11, total_tokens: 11 } });

  // A refusal of one run is the call's.
  upstream.answer(
    '/v1/embeddings',
    reply(200, { object: 'list', data: data(2, 0), model: 'text-embedding-3-small', usage: { prompt_tokens: 4, total_tokens: 4 } }),
  );
  upstream.answer('/v1/embeddings', reply(400, { error: { message: 'Too many tokens', type: 'invalid_request_error', code: null } }));
  const refused = await embed({ model: 'openai-embed-split', input: ['a', 'b', 'c'] });
  t.is(refused.status, 400);
  t.is(refused.body.error.message, 'Too many tokens');
});

test('a neutral provider: inputs in runs of its per-call limit, vectors joined in order, usage summed, floats or base64', async (t) => {
  embedCalls.length = 0;
  const answer = await embed({ model: 'neutral-embed', input: ['a', 'bb', 'ccc', 'dddd', 'eeeee'], dimensions: 2 });
  t.deepEqual(
    embedCalls.map(({ model, inputs, dimensions }) => ({ model, inputs, dimensions })),
    [
      { model: 'neutral-upstream', inputs: ['a', 'bb'], dimensions: 2 },
      { model: 'neutral-upstream', inputs: ['ccc', 'dddd'], dimensions: 2 },
      { model: 'neutral-upstream', inputs: ['eeeee'], dimensions: 2 },
    ],
  );
  t.deepEqual(openAIProblems('CreateEmbeddingResponse', answer.body), []);
  t.deepEqual(
    answer.body.data,
    [
      [0, 1],
      [1, 2],
      [0, 3],
      [1, 4],
      [0, 5],
    ].map((embedding, index) => ({ object: 'embedding', index, embedding })),
  );
  t.like(answer.body, { model: 'neutral-embed', usage: { prompt_tokens: 15, total_tokens: 15 } });
  const base64 = await embed({ model: 'neutral-embed', input: ['a', 'bb', 'ccc'], encoding_format: 'base64' });
  t.deepEqual(
    base64.body.data.map((item) => decoded(item.embedding as string)),
    [
      [0, 1],
      [1, 2],
      [0, 3],
    ],
  );
});

test('embeddings are metered, priced and limited as model calls', async (t) => {
  const metered = await gateway.keyFor(undefined, { limits: { tokensPerMinute: 5 } });
  const first = await embed({ model: 'echo-embed', input: 'one two three four five six' }, metered);
  t.is(first.status, 200);
  const record = await until(
    async () => records.find((candidate) => candidate.endpoint === '/v1/embeddings' && candidate.model === 'echo-embed' && candidate.inputTokens === 6),
    (found) => found !== undefined,
  );
  // 6 tokens at 1 USD per million.
  t.like(record, { provider: 'echo', status: 200, outputTokens: 0, costPicoUsd: 6_000_000 });
  // Its tokens count against the key's limit: the next call is refused.
  const limited = await until(
    () => embed({ model: 'echo-embed', input: 'again' }, metered),
    (answer) => answer.status === 429,
  );
  t.is(limited.body.error.code, 'rate_limit_exceeded');
  const scraped = parseMetrics(await metrics.registry.metrics());
  t.true((value(scraped, 'kmg_model_tokens_total', { model: 'echo-embed', direction: 'input' }) ?? 0) >= 6);

  const small: CatalogModel = { id: 'small', provider: 'openai', upstreamModel: 'text-embedding-3-small', type: 'embeddings' };
  const { models, unpriced } = await priceCatalog([small]);
  t.deepEqual(unpriced, [], "the table's input price is enough for an embeddings model");
  t.is(models[0]?.price?.output, 0);
});

test('embeddings are routed as model calls: a failed deployment is retried on another, then the fallback answers; a spent budget refuses the next call', async (t) => {
  const failing: Provider = { id: 'failing', embed: async () => Promise.reject(new Error('connection reset')) };
  const answering: Provider = { id: 'answering', embed: async ({ inputs }) => ({ vectors: inputs.map(() => Float32Array.of(1)), inputTokens: 3 }) };
  const routed = await modelsApp({
    catalog: [
      { id: 'spread', deployments: [{ provider: 'failing' }, { provider: 'failing', upstreamModel: 'other' }], type: 'embeddings', fallbacks: ['backup'] },
      { id: 'backup', provider: 'answering', type: 'embeddings', price: { input: 1_000_000, output: 0 } },
    ],
    providers: [failing, answering],
    routing: { maxAttempts: 3, sleep: async () => undefined },
    budgets: spendBudgets({ ledger: new MemorySpendLedger({ nowMs: STILL_CLOCK }) }),
  });
  t.teardown(() => routed.close());
  const budgeted = await routed.keyFor(undefined, { limits: { costPerDay: 1 } });
  const send = () => routed.post('/v1/embeddings', { model: 'spread', input: 'a' }, { authorization: `Bearer ${budgeted}` });
  const answer = await send();
  t.is(answer.status, 200);
  t.is(answer.headers.get('x-kmg-attempts'), '3');
  t.is(answer.headers.get('x-kmg-deployment'), 'answering');
  t.like(await answer.json(), { model: 'spread', usage: { prompt_tokens: 3 } });
  // 3 tokens at a million USD per million: 3 USD, over the day's 1.
  const refused = await until(send, (res) => res.status === 429);
  t.like(await refused.json(), { error: { code: 'budget_exceeded' } });
});

test('a client that leaves during a batch stops the runs left', async (t) => {
  let calls = 0;
  let ended = false;
  let started!: () => void;
  const firstRun = new Promise<void>((resolve) => (started = resolve));
  const slow: Provider = {
    id: 'slow',
    embeddingInputsPerCall: 1,
    embed: async ({ inputs, signal }) => {
      calls++;
      started();
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      ended = true;
      return { vectors: inputs.map(() => Float32Array.of(1)), inputTokens: 1 };
    },
  };
  const app = await modelsApp({ catalog: [{ id: 'slow-embed', provider: 'slow', type: 'embeddings' }], providers: [slow] });
  t.teardown(() => app.close());
  const leaving = new AbortController();
  const sent = app.post('/v1/embeddings', { model: 'slow-embed', input: ['a', 'b', 'c'] }, { authorization: `Bearer ${await app.keyFor()}` }, leaving.signal);
  await firstRun;
  leaving.abort();
  await sent.catch(() => undefined);
  await until(
    async () => ended,
    (done) => done,
  );
  await new Promise((resolve) => setImmediate(resolve));
  t.is(calls, 1);
});

test('the checks come in the order decisions.md gives: 403 before 400 before 404 before 429', async (t) => {
  const bad = { input: [] };
  const noScope = await gateway.keyFor(SCOPES.filter((scope) => scope !== 'embeddings:create'));
  t.is((await embed({ model: 'nope', ...bad }, noScope)).status, 403);
  t.is((await embed({ model: 'echo-embed', ...bad }, await gateway.keyFor(undefined, { models: ['echo-chat'] }))).status, 403);
  t.is((await embed({ model: 'nope', ...bad })).status, 400);
  const spent = await gateway.keyFor(undefined, { limits: { requestsPerMinute: 1 } });
  t.is((await embed({ model: 'echo-embed', input: 'a' }, spent)).status, 200);
  t.is((await embed({ model: 'nope', input: 'a' }, spent)).status, 404);
  t.is((await embed({ model: 'echo-chat', input: 'a' }, spent)).status, 400);
  t.is((await embed({ model: 'echo-embed', input: 'a' }, spent)).status, 429);
});
