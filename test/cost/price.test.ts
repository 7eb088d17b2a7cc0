import test from 'ava';
import { catalogModelSchema } from '../../lib/models/catalog.js';
import { callCost, tokenPrice } from '../../lib/cost/price.js';
import { picoOfUsd, usdOfPico } from '../../lib/picodollars.js';
import { priceCatalog } from '../../lib/cost/price-table.js';

const SONNET = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 };

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
  t.deepEqual(models[2]?.price, { input: 1, output: 2 });
  t.is(models[3]?.price, undefined);
  t.deepEqual(unpriced, ['mystery']);
});
