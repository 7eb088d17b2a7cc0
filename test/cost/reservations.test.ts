import { Readable } from 'node:stream';
import test, { type TestFn } from 'ava';
import Koa from 'koa';
import { budgetsRouter } from '../../lib/admin/budgets-router.js';
import { MemoryAccountBudgetStore } from '../../lib/stores/memory/account-budget-store.js';
import { spendBudgets, type SpendLedger } from '../../lib/cost/budgets.js';
import { MemorySpendLedger } from '../../lib/stores/memory/spend-ledger.js';
import type { CatalogModel } from '../../lib/models/catalog.js';
import type { Provider, ProviderRequest } from '../../lib/models/provider.js';
import { createGatewayMetrics } from '../../lib/metrics/gateway-metrics.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';

import { RedisCooldownStore } from '../../lib/stores/redis/cooldown-store.js';
import { RedisModelLimiter } from '../../lib/stores/redis/model-limiter.js';
import { RedisSpendLedger } from '../../lib/stores/redis/spend-ledger.js';
import { newAccount } from '../../lib/testing/creation-limiter-contract.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { listen } from '../helpers/http.js';
import { modelsApp } from '../helpers/models-app.js';
import { until } from '../helpers/poll.js';
import { redisClients } from '../helpers/redis-clients.js';
import { withRedis } from '../helpers/services.js';

// Budgets reserve each call's maximum cost before it is sent: with every call naming its maximum,
// spend never passes a budget, however many calls are under way on however many instances.

const { client, keyPrefix } = redisClients(test);

// Output at 1 USD per million tokens, input free: a call's cost is its output, 1,000,000 picodollars a token.
const CATALOG: CatalogModel[] = [{ id: 'metered', provider: 'spender', upstreamModel: 'metered-1', price: { input: 0, output: 1 } }];
const PICO_PER_OUTPUT_TOKEN = 1_000_000;

/** A provider that spends all the output a call allows: its cost is exactly its reservation. */
const spender: Provider = {
  id: 'spender',
  async chatCompletions({ body }: ProviderRequest) {
    // Answers a turn later, so that the calls of a batch are all under way together.
    await new Promise((resolve) => setImmediate(resolve));
    const completion = typeof body.max_tokens === 'number' ? body.max_tokens : 10;
    const answer = {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 0,
      model: body.model,
      choices: [],
      usage: { prompt_tokens: 5, completion_tokens: completion, total_tokens: completion + 5 },
    };
    return { statusCode: 200, headers: { 'content-type': 'application/json' }, body: Readable.from([JSON.stringify(answer)]) };
  },
};

/** Two instances of a gateway on one ledger each (`ledger()` makes them: one shared, or one per instance on one Redis), with one account's budget. */
async function instances(ledger: () => Promise<SpendLedger>, costPerDay: number) {
  const accounts = new MemoryAccountBudgetStore();
  const account = newAccount();
  await accounts.set(account, { costPerDay });
  const apps = await Promise.all(
    [0, 1].map(async () => modelsApp({ catalog: CATALOG, providers: [spender], budgets: spendBudgets({ ledger: await ledger(), accounts }) })),
  );
  const keys = await Promise.all(apps.map((app) => app.keyFor(undefined, { account })));
  return { apps, keys, close: () => Promise.all(apps.map((app) => app.close())), ledger, account };
}

function reservationSuite(suiteTest: TestFn, name: string, makeLedger: () => () => Promise<SpendLedger>) {
  suiteTest(
    `${name}: 50 calls naming max_tokens, 10 in flight on each of two instances, against a budget that fits 7: exactly 7 answered, never more spent`,
    async (t) => {
      const ledger = makeLedger();
      const { apps, keys, close, account } = await instances(ledger, (7.5 * 1000 * PICO_PER_OUTPUT_TOKEN) / 1e12);
      t.teardown(close);
      let started = 0;
      const statuses: number[] = [];
      const worker = async (instance: number) => {
        while (started < 50) {
          started += 1;
          const app = apps[instance] as (typeof apps)[number];
          const answer = await app.post(
            '/v1/chat/completions',
            { model: 'metered', max_tokens: 1000, messages: [{ role: 'user', content: 'hi' }] },
            { authorization: `Bearer ${keys[instance] as string}` },
          );
          statuses.push(answer.status);
          await answer.arrayBuffer();
        }
      };
      await Promise.all([0, 1].flatMap((instance) => Array.from({ length: 10 }, () => worker(instance))));
      t.is(statuses.filter((status) => status === 200).length, 7);
      t.is(statuses.filter((status) => status === 429).length, 43);
      // Charged once each answer has ended: polled, never raced.
      const reader = await ledger();
      const spent = await until(
        () => reader.spent([`account:${account}`]),
        ({ held }) => held[0] === 0n,
      );
      t.deepEqual(spent.spend, [{ day: 7_000_000_000n, month: 7_000_000_000n }], 'the budget is 7,500,000,000');
    },
  );

  suiteTest(`${name}: a call naming no maximum reserves the default output (4096 tokens); the answer says what is left of the budget`, async (t) => {
    // 4095 tokens' worth: a call without max_tokens does not fit, one with 4095 does.
    const { apps, keys, close } = await instances(makeLedger(), (4095 * PICO_PER_OUTPUT_TOKEN) / 1e12);
    t.teardown(close);
    const [app] = apps;
    const headers = { authorization: `Bearer ${keys[0] as string}` };
    const unbounded = await app!.post('/v1/chat/completions', { model: 'metered', messages: [{ role: 'user', content: 'hi' }] }, headers);
    t.is(unbounded.status, 429);
    t.like(await unbounded.json(), {
      error: {
        code: 'budget_exceeded',
        message:
          "Budget exceeded: the account's daily budget of 0.004095 USD has 0.004095 USD left, less than this call's maximum cost of 0.004096 USD; it resets at 2030-01-16T00:00:00Z",
      },
    });
    const bounded = await app!.post('/v1/chat/completions', { model: 'metered', max_tokens: 95, messages: [{ role: 'user', content: 'hi' }] }, headers);
    t.is(bounded.status, 200);
    t.is(bounded.headers.get('x-kmg-budget-remaining-usd'), '0.004');
    await bounded.arrayBuffer();
  });
}

// The ledgers' clock: a day whose end the refusals name.
const NOON = () => Date.UTC(2030, 0, 15, 12);

reservationSuite(test, 'memory', () => {
  const ledger = new MemorySpendLedger({ nowMs: NOON });
  return async () => ledger;
});
reservationSuite(withRedis(test), 'redis', () => {
  const prefix = keyPrefix();
  return async () => new RedisSpendLedger({ client: await client(), keyPrefix: prefix, nowMs: NOON });
});

test('with refuseUnpriced, a call to a model with no known price is refused where a budget applies, and only there', async (t) => {
  const accounts = new MemoryAccountBudgetStore();
  await accounts.set('budgeted', { costPerMonth: 10 });
  const catalog: CatalogModel[] = [...CATALOG, { id: 'unpriced', provider: 'spender', upstreamModel: 'unknown-1' }];
  const app = await modelsApp({ catalog, providers: [spender], budgets: spendBudgets({ ledger: new MemorySpendLedger(), accounts, refuseUnpriced: true }) });
  t.teardown(() => app.close());
  const call = async (account: string, model: string) => {
    const answer = await app.post(
      '/v1/chat/completions',
      { model, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
      { authorization: `Bearer ${await app.keyFor(undefined, { account })}` },
    );
    return { status: answer.status, body: (await answer.json()) as { error?: { code: string } } };
  };
  t.like(await call('budgeted', 'unpriced'), { status: 400, body: { error: { code: 'model_unpriced' } } });
  t.is((await call('budgeted', 'metered')).status, 200);
  t.is((await call('free', 'unpriced')).status, 200, 'no budget, nothing to protect');
});

test('the metrics say how many models have no known price', async (t) => {
  const metrics = createGatewayMetrics();
  metrics.unpricedModels(2);
  t.regex(await metrics.registry.metrics(), /^kmg_unpriced_models 2$/m);
});

test("the admin API shows what an account's calls under way hold against its budgets", async (t) => {
  const ledger = new MemorySpendLedger();
  const accounts = new MemoryAccountBudgetStore();
  await accounts.set('acme', { costPerDay: 1 });
  const app = new Koa();
  app.use(budgetsRouter({ accounts, usageStore: new MemoryUsageStore(), catalog: [], ledger }).routes());
  const server = await listen(app);
  t.teardown(() => server.close());
  await ledger.reserve([{ party: 'account:acme', day: 1_000_000_000_000n }], 250_000_000_000, 60_000);
  const limits = await (await fetch(`${server.url}/admin/v1/accounts/acme/limits`)).json();
  t.like(limits, { object: 'account_limits', account: 'acme', costPerDay: 1, spent: { day: 0, month: 0 }, reserved: 0.25 });
});

test("the admin API shows a key's spend, its rotations' included, and what its calls under way hold; an unknown key is 404", async (t) => {
  const ledger = new MemorySpendLedger();
  const keys = new MemoryKeyStore();
  const usageStore = new MemoryUsageStore();
  const now = Date.parse('2030-03-10T12:00:00Z');
  const old = await keys.create({
    account: 'acme',
    hash: 'a'.repeat(64),
    scopes: ['chat:completions'],
    models: null,
    expiresAt: null,
    limits: { costPerDay: 1 },
  });
  const rotated = await keys.rotate(old.id, { hash: 'b'.repeat(64), nowSeconds: now / 1000, graceEndsAt: now / 1000 });
  const replacement = rotated.outcome === 'rotated' ? rotated.replacement : old;
  await usageStore.insert([
    usageRecord({ time: now, account: 'acme', keyId: old.id, costPicoUsd: 100_000_000_000 }),
    usageRecord({ time: now, account: 'acme', keyId: replacement.id, costPicoUsd: 50_000_000_000 }),
    usageRecord({ time: Date.parse('2030-03-01T00:00:00Z'), account: 'acme', keyId: replacement.id, costPicoUsd: 1_000_000_000_000 }),
  ]);
  const app = new Koa();
  app.use(openAIErrors());
  app.use(budgetsRouter({ accounts: new MemoryAccountBudgetStore(), usageStore, catalog: [], ledger, keys, nowMs: () => now }).routes());
  const server = await listen(app);
  t.teardown(() => server.close());
  // A call under way on the replacement holds against the line's one budget, the first key's.
  await ledger.reserve([{ party: `key:${old.id}`, day: 1_000_000_000_000n }], 200_000_000_000, 60_000);
  const spend = async (id: string) => {
    const answer = await fetch(`${server.url}/admin/v1/keys/${id}/spend`);
    return { status: answer.status, body: (await answer.json()) as unknown };
  };
  t.deepEqual(await spend(replacement.id), {
    status: 200,
    body: { object: 'key_spend', id: replacement.id, spent: { day: 0.15, month: 1.15 }, reserved: 0.2 },
  });
  t.like(await spend('key_unknown'), { status: 404, body: { error: { code: 'key_not_found' } } });
  t.like(await spend('not%20an%20id'), { status: 400, body: { error: { code: 'invalid_id' } } });
});

test("a call naming no maximum reserves its model's maxOutputTokens from the catalog, when it gives one", async (t) => {
  const accounts = new MemoryAccountBudgetStore();
  await accounts.set('short', { costPerDay: (100 * PICO_PER_OUTPUT_TOKEN) / 1e12 });
  await accounts.set('shorter', { costPerDay: (99 * PICO_PER_OUTPUT_TOKEN) / 1e12 });
  const catalog: CatalogModel[] = [{ ...CATALOG[0]!, maxOutputTokens: 100 }];
  const app = await modelsApp({ catalog, providers: [spender], budgets: spendBudgets({ ledger: new MemorySpendLedger(), accounts }) });
  t.teardown(() => app.close());
  const call = async (account: string) => {
    const answer = await app.post(
      '/v1/chat/completions',
      { model: 'metered', messages: [{ role: 'user', content: 'hi' }] },
      { authorization: `Bearer ${await app.keyFor(undefined, { account })}` },
    );
    await answer.arrayBuffer();
    return answer.status;
  };
  t.is(await call('short'), 200);
  t.is(await call('shorter'), 429);
});

withRedis(test)(
  "redis: a call is admitted in one round trip (its key's and account's reservations and its request counted in one script, its deployments' cooldowns read beside it) and settled in one; a budget that refuses counts no request and keeps no hold",
  async (t) => {
    const redis = await client();
    const prefix = keyPrefix();
    const ledger = new RedisSpendLedger({ client: redis, keyPrefix: `${prefix}:spend`, nowMs: NOON });
    const limiter = new RedisModelLimiter({ client: redis, keyPrefix: `${prefix}:models` });
    const accounts = new MemoryAccountBudgetStore();
    const account = newAccount();
    await accounts.set(account, { costPerDay: 1 });
    // What went to Redis: one write is one round trip (a pipeline is written whole).
    let writes = 0;
    const write = redis.stream.write.bind(redis.stream) as (...args: unknown[]) => boolean;
    redis.stream.write = ((...args: unknown[]) => {
      writes += 1;
      return write(...args);
    }) as typeof redis.stream.write;
    const sentBefore: number[] = [];
    const counting: Provider = { id: 'spender', chatCompletions: async (request) => (sentBefore.push(writes), spender.chatCompletions!(request)) };
    // Two deployments: the call's route reads their cooldowns too.
    const catalog: CatalogModel[] = [
      {
        id: 'metered',
        deployments: [
          { provider: 'spender', upstreamModel: 'metered-1' },
          { provider: 'spender', upstreamModel: 'metered-2' },
        ],
        price: { input: 0, output: 1 },
      },
    ];
    const app = await modelsApp({
      catalog,
      providers: [counting],
      modelLimiter: limiter,
      budgets: spendBudgets({ ledger, accounts }),
      routing: { maxAttempts: 1, cooldown: { store: new RedisCooldownStore({ client: redis, keyPrefix: `${prefix}:cooldown` }) } },
    });
    t.teardown(() => app.close());
    // Read on a client of its own: its reads are not the gateway's writes.
    const observer = await client();
    const holds = async () => Promise.all((await observer.keys(`${prefix}:spend:*:held`)).map(async (holdsKey) => observer.zcard(holdsKey)));
    const noHolds = () => until(holds, (counts) => counts.every((count) => count === 0));
    const call = async (key: string, maxTokens: number) => {
      const answer = await app.post(
        '/v1/chat/completions',
        { model: 'metered', max_tokens: maxTokens, messages: [{ role: 'user', content: 'hi' }] },
        { authorization: `Bearer ${key}` },
      );
      return { status: answer.status, body: (await answer.json()) as { error?: { code: string; message: string } } };
    };
    // A budget of its own, two calls a minute and tokens a minute: two parties, a request limit and a token limit.
    const limits = { requestsPerMinute: 2, tokensPerMinute: 1_000_000, costPerDay: 2 };
    // Once, so that Redis knows the scripts: the first call of a fresh Redis sends their text too.
    t.is((await call(await app.keyFor(undefined, { account, limits }), 10)).status, 200);
    await noHolds();

    const key = await app.keyFor(undefined, { account, limits });
    // 1.5 USD: the key's budget holds it, the account's refuses; the key's hold goes with the refusal, and no request counts.
    const refused = await call(key, 1_500_000);
    t.like(refused, { status: 429, body: { error: { code: 'budget_exceeded' } } });
    t.regex(refused.body.error?.message ?? '', /the account's daily budget/);
    t.deepEqual(await holds(), [], 'no hold left');

    const before = writes;
    t.is((await call(key, 1000)).status, 200);
    t.deepEqual(
      sentBefore.slice(1).map((sent) => sent - before),
      [1],
      'one write to Redis between the request and the upstream',
    );
    await noHolds();
    t.is(writes - before, 2, 'and one once it has answered: its tokens, its cost and the end of its holds');
    t.is((await call(key, 1000)).status, 200, 'the budget refusal counted no request');
    t.like(await call(key, 1000), { status: 429, body: { error: { code: 'rate_limit_exceeded' } } });
    await noHolds();
  },
);
