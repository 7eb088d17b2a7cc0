import test, { type TestFn } from 'ava';
import { webhookNotifier, type AlertClaims } from '../../lib/cost/budget-alerts.js';
import { MemoryAlertClaims } from '../../lib/stores/memory/alert-claims.js';
import { spendBudgets, type SpendLedger } from '../../lib/cost/budgets.js';
import { MemorySpendLedger } from '../../lib/stores/memory/spend-ledger.js';
import { RedisAlertClaims } from '../../lib/stores/redis/alert-claims.js';
import { RedisSpendLedger } from '../../lib/stores/redis/spend-ledger.js';
import { newAccount, testClock } from '../../lib/testing/creation-limiter-contract.js';
import { modelsApp } from '../helpers/models-app.js';
import { until } from '../helpers/poll.js';
import { redisClients } from '../helpers/redis-clients.js';
import { withRedis } from '../helpers/services.js';
import { webhookReceiver } from '../helpers/webhook-receiver.js';

// Budget alerts: a webhook told once per threshold per period, signed, retried, never on a call's way.

const { client, keyPrefix } = redisClients(test);
const SECRET = 'alert-secret';
const USD = 1_000_000_000_000;

const receiver = () => webhookReceiver(SECRET);

function alertSuite(
  suiteTest: TestFn,
  name: string,
  shared: () => Promise<{ ledger: (nowMs: () => number) => Promise<SpendLedger>; claims: (nowMs: () => number) => Promise<AlertClaims> }>,
) {
  suiteTest(`${name}: each threshold of a soft budget alerts once per period across two instances, signed; the soft budget never refuses`, async (t) => {
    const hook = await receiver();
    t.teardown(hook.close);
    const clock = testClock('2030-03-10T12:00:00.000Z');
    const { ledger, claims } = await shared();
    const key = { id: newAccount(), account: newAccount() };
    const accounts = { get: async () => ({ costPerDay: 1, costSoft: true }) };
    const notify = webhookNotifier({ webhooks: [{ url: hook.url }], secret: SECRET });
    const instances = await Promise.all(
      [0, 1].map(async () => spendBudgets({ ledger: await ledger(clock.nowMs), accounts, alerts: { claims: await claims(clock.nowMs), notify } })),
    );
    // 6 calls of 0.3 USD, 3 at once on each instance: 1.8 USD spent, past every threshold, none refused.
    const call = async (instance: number) => {
      const budgets = instances[instance % 2] as (typeof instances)[number];
      const check = await budgets.check(key, {}, 0.3 * USD);
      t.is(check.refusal, undefined);
      await budgets.charge(check.parties, 0.3 * USD, check.reservation);
    };
    await Promise.all([0, 1, 2, 3, 4, 5].map(call));
    await until(
      async () => hook.received.length,
      (count) => count >= 3,
    );
    t.deepEqual(
      hook.received.map(({ body }) => body.threshold).sort((a, b) => a - b),
      [50, 80, 100],
    );
    t.true(hook.received.every(({ signed }) => signed));
    t.like(hook.received.find(({ body }) => body.threshold === 50)?.body, {
      type: 'budget.threshold',
      scope: 'account',
      id: key.account,
      budget_usd: 1,
      period: 'day',
    });
    // A new day: a new period, each threshold alerts again.
    clock.ms += 86_400_000;
    for (let i = 0; i < 2; i++) await call(i);
    await until(
      async () => hook.received.length,
      (count) => count >= 4,
    );
    t.is(hook.received.filter(({ body }) => body.threshold === 50).length, 2);
    t.is(hook.received.length, 4);
  });
}

alertSuite(test, 'memory', async () => {
  // One process: both instances share its ledger and its claims.
  const claims = new MemoryAlertClaims();
  let ledger: MemorySpendLedger | undefined;
  return {
    ledger: async (nowMs) => (ledger ??= new MemorySpendLedger({ nowMs })),
    claims: async () => claims,
  };
});
alertSuite(withRedis(test), 'redis', async () => {
  const prefix = keyPrefix();
  return {
    ledger: async (nowMs) => new RedisSpendLedger({ client: await client(), keyPrefix: prefix, nowMs }),
    claims: async () => new RedisAlertClaims({ client: await client(), keyPrefix: prefix }),
  };
});

test('a webhook that is down is tried again with backoff, and never slows a call', async (t) => {
  const down = await receiver();
  await down.close();
  const waits: number[] = [];
  const outcomes: Array<{ attempts: number; error?: Error }> = [];
  let letGo: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (letGo = resolve));
  const notify = webhookNotifier({
    webhooks: [{ url: down.url, format: 'slack' }],
    secret: SECRET,
    attempts: 3,
    // The first wait holds until the call has been answered: the call cannot have waited for it.
    sleep: async (ms) => {
      waits.push(ms);
      if (waits.length === 1) await held;
    },
    onOutcome: (outcome) => outcomes.push(outcome),
  });
  const accounts = { get: async () => ({ costPerDay: 1e-9, costSoft: true }) };
  const app = await modelsApp({
    budgets: spendBudgets({ ledger: new MemorySpendLedger(), accounts, alerts: { claims: new MemoryAlertClaims(), notify, thresholds: [100] } }),
    catalog: [{ id: 'echo-1', provider: 'local', upstreamModel: 'echo-upstream-1', price: { input: 1, output: 1 } }],
  });
  t.teardown(() => app.close());
  const key = await app.keyFor();
  const answer = await app.post('/v1/chat/completions', { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${key}` });
  t.is(answer.status, 200, 'a soft budget spent 1000 times over still answers');
  await answer.arrayBuffer();
  await until(
    async () => waits.length,
    (count) => count === 1,
  );
  t.deepEqual(outcomes, [], 'still trying when the call was answered');
  letGo();
  await until(
    async () => outcomes.length,
    (count) => count === 1,
  );
  t.deepEqual(waits, [1000, 2000]);
  t.like(outcomes[0], { attempts: 3 });
  t.true(outcomes[0]?.error instanceof Error);
});
