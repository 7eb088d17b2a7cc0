import test from 'ava';
import { priceCatalog } from '../../lib/cost/price-table.js';
import { callCost, tokenPrice } from '../../lib/cost/price.js';
import { catalogModelSchema, type CatalogModel } from '../../lib/models/catalog.js';
import { picoOfUsd, usdOfPico } from '../../lib/picodollars.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { catalogProviders, modelsApp } from '../helpers/models-app.js';
import { mockProviders } from '../helpers/models-upstream.js';
import { until } from '../helpers/poll.js';

// What calls cost: prices, and the cost of a call through the gateway. The budgets keep a file of
// their own: their Redis ledger must answer within 500 ms counted from the call, and beside these
// tests' synchronous work on one thread (the price table's loading, 20,000 conversions) it once
// did not.

/** Claude Sonnet 4's price, in dollars per million tokens. */
const SONNET = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 };

// Prices.

test('each price field is charged for its own tokens, exactly, in picodollars', (t) => {
  const price = tokenPrice(SONNET);
  // 1 token at $0.30 per million is 0.3 microdollars: 300,000 picodollars, no fraction.
  t.is(callCost(price, { inputTokens: 1, outputTokens: 0, cacheReadTokens: 1 }), 300_000);
  t.is(callCost(price, { inputTokens: 1, outputTokens: 0, cacheWriteTokens: 1 }), 3_750_000);
  t.is(callCost(price, { inputTokens: 1, outputTokens: 0 }), 3_000_000);
  t.is(callCost(price, { inputTokens: 0, outputTokens: 1 }), 15_000_000);
  // 1,000 input of which 200 read and 100 written, 50 output: 700×3 + 200×0.3 + 100×3.75 + 50×15 millionths of a dollar.
  const cost = callCost(price, { inputTokens: 1000, outputTokens: 50, cacheReadTokens: 200, cacheWriteTokens: 100 });
  t.is(cost, (700 * 3 + 200 * 0.3 + 100 * 3.75 + 50 * 15) * 1_000_000);
  t.is(usdOfPico(cost), 0.003285);
});

test('cache prices left out are the input price; no price costs nothing', (t) => {
  t.is(callCost(tokenPrice({ input: 2, output: 8 }), { inputTokens: 10, outputTokens: 0, cacheReadTokens: 10 }), 20_000_000);
  t.is(callCost(tokenPrice(undefined), { inputTokens: 1_000_000, outputTokens: 1_000_000 }), 0);
});

test('a sum of many small costs stays exact, where adding dollars as floats drifts', (t) => {
  const price = tokenPrice({ input: 0.1, output: 0.1 });
  let pico = 0n;
  let floatUsd = 0;
  for (let call = 0; call < 1000; call += 1) {
    pico += BigInt(callCost(price, { inputTokens: 1, outputTokens: 0 }));
    floatUsd += 0.1 / 1_000_000;
  }
  t.is(usdOfPico(pico), 0.0001);
  t.not(floatUsd, 0.0001);
});

test('picodollars as a number and as a bigint give the same USD: the nearest double to the exact decimal', (t) => {
  // A fixed sequence (a 64-bit LCG) of integers of every size up to 2^53, and the edges.
  let state = 12_345n;
  const values = [0, 1, 999_999_999_999, 1_000_000_000_000, 4_500_000_000, Number.MAX_SAFE_INTEGER];
  for (let i = 0; i < 20_000; i += 1) {
    state = (state * 6_364_136_223_846_793_005n + 1_442_695_040_888_963_407n) % (1n << 64n);
    values.push(Number(state % (1n << BigInt(1 + (i % 53)))));
  }
  const differing = values.filter((pico) => usdOfPico(pico) !== usdOfPico(BigInt(pico)));
  t.deepEqual(differing, []);
  t.is(usdOfPico(2n ** 60n), 1_152_921.504_606_847);
});

test('USD converts to picodollars by its decimal digits, large budgets included', (t) => {
  t.is(picoOfUsd(5), 5_000_000_000_000n);
  t.is(picoOfUsd(0.1), 100_000_000_000n);
  t.is(picoOfUsd(1_000_000.01), 1_000_000_010_000_000_000n);
  t.is(usdOfPico(picoOfUsd(1_000_000.01)), 1_000_000.01);
});

test('a catalog price is checked: both prices needed, no negative or over-precise price, no unknown field', (t) => {
  const parse = (price: unknown) => catalogModelSchema.safeParse({ id: 'm', provider: 'p', price }).success;
  t.true(parse(SONNET));
  t.true(parse({ input: 0.075, output: 0.3 }));
  t.false(parse({ input: 3 }));
  t.false(parse({ input: -1, output: 1 }));
  t.false(parse({ input: 0.0000001, output: 1 }));
  t.false(parse({ input: 1, output: 1, cache_read: 1 }));
});

test('the price table prices a well-known upstream model; the catalog price wins; an unknown model is listed as unpriced', async (t) => {
  const { models, unpriced } = await priceCatalog([
    { id: 'sonnet', provider: 'anthropic', upstreamModel: 'claude-sonnet-4-20250514' },
    { id: 'mini', provider: 'my-proxy', upstreamModel: 'gpt-4o-mini' },
    { id: 'own', provider: 'openai', upstreamModel: 'gpt-4o', price: { input: 1, output: 2 } },
    { id: 'mystery', provider: 'local', upstreamModel: 'no-such-model-anywhere' },
  ]);
  t.deepEqual(models[0]?.price, SONNET);
  // Found by its name alone when the provider's id is not one the table knows.
  t.like(models[1]?.price, { input: 0.15, output: 0.6 });
  // The catalog's input and output win; the cache read price the table knows is taken (OpenAI bills no cache write).
  t.deepEqual(models[2]?.price, { input: 1, output: 2, cacheRead: 1.25 });
  t.is(models[3]?.price, undefined);
  t.deepEqual(unpriced, ['mystery']);
});

test('a model the catalog prices by input and output only takes its cache prices from the table, not the input price: cache reads are not charged 10 times over', async (t) => {
  const { models } = await priceCatalog([
    { id: 'sonnet', provider: 'anthropic', upstreamModel: 'claude-sonnet-4-20250514', price: { input: 3, output: 15 } },
    { id: 'own-cache', provider: 'anthropic', upstreamModel: 'claude-sonnet-4-20250514', price: { input: 3, output: 15, cacheRead: 0.5 } },
    { id: 'local', provider: 'local', upstreamModel: 'no-such-model-anywhere', price: { input: 1, output: 1 } },
  ]);
  t.deepEqual(models[0]?.price, SONNET);
  t.deepEqual(models[1]?.price, { ...SONNET, cacheRead: 0.5 }, "the catalog's own cache price wins");
  t.deepEqual(models[2]?.price, { input: 1, output: 1 }, 'unknown to the table: the cache prices stay the input price');
  t.is(callCost(tokenPrice(models[0]?.price), { inputTokens: 1000, outputTokens: 0, cacheReadTokens: 1000 }), 300_000_000);
});

test("a model listed by its deployments is priced by its first deployment's upstream model, as the same model resolved is", async (t) => {
  const catalog: CatalogModel[] = [
    {
      id: 'smart',
      deployments: [
        { provider: 'openai', upstreamModel: 'gpt-4.1' },
        { provider: 'anthropic', upstreamModel: 'claude-sonnet-4-20250514' },
      ],
    },
    // The upstream model's name defaults to the model's id, under the deployment's provider.
    { id: 'gpt-4.1', deployments: [{ provider: 'openai' }] },
  ];
  const listed = await priceCatalog(catalog);
  const GPT_41 = { input: 2, output: 8, cacheRead: 0.5 };
  t.deepEqual(
    listed.models.map((model) => model.price),
    [GPT_41, GPT_41],
  );
  t.deepEqual(listed.unpriced, []);
  const resolved = await priceCatalog(catalog.map((model) => catalogModelSchema.parse(model)));
  t.deepEqual(
    resolved.models.map((model) => model.price),
    [GPT_41, GPT_41],
  );
});

// The cost of a call through the gateway.

const GPT = { input: 0.15, output: 0.6, cacheRead: 0.075 };

async function pricedApp() {
  const upstream = await mockProviders();
  const records: UsageRecord[] = [];
  const app = await modelsApp({
    catalog: [
      { id: 'gpt-test', provider: 'openai', upstreamModel: 'gpt-4o-mini', price: GPT },
      { id: 'claude-test', provider: 'anthropic', upstreamModel: 'claude-sonnet-4', price: SONNET },
    ],
    providers: catalogProviders(upstream.url),
    usageRecorder: { record: (record) => records.push(record) },
  });
  return { upstream, records, app, close: () => Promise.all([app.close(), upstream.close()]) };
}

const CALLS = [
  { endpoint: '/v1/chat/completions', model: 'gpt-test', body: { messages: [{ role: 'user', content: 'hi' }] }, headers: {} },
  { endpoint: '/v1/responses', model: 'gpt-test', body: { input: 'hi' }, headers: {} },
  {
    endpoint: '/v1/messages',
    model: 'claude-test',
    body: { max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
    headers: { 'anthropic-version': '2023-06-01' },
  },
  // Translated: each model called in the other provider's format.
  { endpoint: '/v1/chat/completions', model: 'claude-test', body: { max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }, headers: {} },
  {
    endpoint: '/v1/messages',
    model: 'gpt-test',
    body: { max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
    headers: { 'anthropic-version': '2023-06-01' },
  },
] as const;

for (const { endpoint, model, body, headers } of CALLS) {
  test(`${endpoint} on ${model}: a streamed call and a whole one each cost their upstream's reported tokens at the model's price`, async (t) => {
    const { upstream, records, app, close } = await pricedApp();
    t.teardown(close);
    const key = await app.keyFor();
    for (const stream of [false, true]) {
      const response = await app.post(endpoint, { model, ...body, stream }, { authorization: `Bearer ${key}`, ...headers });
      t.is(response.status, 200);
      await response.text();
      const record = await until(
        async () => records.find((each) => each.stream === stream),
        (found) => found !== undefined,
      );
      const reported = upstream.calls.at(-1)?.usage ?? { input: 0, output: 0 };
      // The mock's Messages answers hold 1 cache write and 2 cache reads among their input.
      const expected =
        model === 'claude-test'
          ? callCost(tokenPrice(SONNET), { inputTokens: reported.input, outputTokens: reported.output, cacheWriteTokens: 1, cacheReadTokens: 2 })
          : callCost(tokenPrice(GPT), { inputTokens: reported.input, outputTokens: reported.output });
      t.true(expected > 0);
      t.like(record, { stream, inputTokens: reported.input, outputTokens: reported.output, costPicoUsd: expected });
    }
  });
}

test('cached input tokens OpenAI reports in its details are charged at the cache price', async (t) => {
  const { chatCompletionsAnswer } = await import('../../lib/models/formats/chat-completions/answer-format.js');
  const { responsesAnswer } = await import('../../lib/models/formats/responses/answer-format.js');
  const chat = chatCompletionsAnswer.json({ usage: { prompt_tokens: 1000, completion_tokens: 10, prompt_tokens_details: { cached_tokens: 800 } } }, 'm');
  const responses = responsesAnswer.json({ usage: { input_tokens: 1000, output_tokens: 10, input_tokens_details: { cached_tokens: 800 } } }, 'm');
  for (const usage of [chat, responses]) {
    t.deepEqual(usage, { inputTokens: 1000, outputTokens: 10, cacheReadTokens: 800 });
    // 200 × 0.15 + 800 × 0.075 + 10 × 0.6 microdollars.
    t.is(callCost(tokenPrice(GPT), usage), (200 * 0.15 + 800 * 0.075 + 10 * 0.6) * 1_000_000);
  }
});

test("a call its key's budget refuses sends nothing upstream and costs nothing", async (t) => {
  const { upstream, records, app, close } = await pricedApp();
  t.teardown(close);
  // Less than the call's maximum cost (its reservation): refused before anything is sent.
  const key = await app.keyFor(undefined, { limits: { costPerDay: 0.000001 } });
  const call = () => app.post('/v1/chat/completions', { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${key}` });
  const refused = await call();
  t.is(refused.status, 429);
  t.like(await refused.json(), { error: { type: 'rate_limit_error', code: 'budget_exceeded' } });
  t.is(upstream.calls.length, 0);
  const record = await until(
    async () => records.find((each) => each.status === 429),
    (found) => found !== undefined,
  );
  t.like(record, { costPicoUsd: 0, upstreamMs: null });
});
