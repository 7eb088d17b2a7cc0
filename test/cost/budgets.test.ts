import test from 'ava';
import { cachedAccountBudgets } from '../../lib/cost/account-budget-store.js';
import { budgetPeriods, spendBudgets, spendFromUsage, type SpendLedger } from '../../lib/cost/budgets.js';
import { MemoryAccountBudgetStore } from '../../lib/stores/memory/account-budget-store.js';
import { MemorySpendLedger } from '../../lib/stores/memory/spend-ledger.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { hashApiKey } from '../../lib/auth/keys.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';
import { RedisSpendLedger } from '../../lib/stores/redis/spend-ledger.js';
import { newAccount, testClock } from '../../lib/testing/creation-limiter-contract.js';
import { redisClients } from '../helpers/redis-clients.js';
import { withRedis } from '../helpers/services.js';

const { client, keyPrefix } = redisClients(test);

test('the UTC month ends at the first midnight of the next month, leap days and years included', (t) => {
  const periods = (iso: string) => budgetPeriods(Date.parse(iso));
  t.deepEqual(periods('2030-01-31T23:59:59.999Z'), {
    day: { id: '2030-01-31', endsAt: Date.parse('2030-02-01T00:00:00Z') },
    month: { id: '2030-01', endsAt: Date.parse('2030-02-01T00:00:00Z') },
  });
  t.like(periods('2030-02-01T00:00:00.000Z'), { month: { id: '2030-02', endsAt: Date.parse('2030-03-01T00:00:00Z') } });
  t.like(periods('2028-02-29T12:00:00Z'), { day: { id: '2028-02-29' }, month: { endsAt: Date.parse('2028-03-01T00:00:00Z') } });
  t.like(periods('2030-12-31T23:00:00Z'), { month: { id: '2030-12', endsAt: Date.parse('2031-01-01T00:00:00Z') } });
});

withRedis(test)("two processes sharing Redis see each other's spend", async (t) => {
  const clock = testClock('2030-01-15T12:00:00.000Z');
  const shared = { keyPrefix: keyPrefix(), nowMs: clock.nowMs };
  const [one, two] = [new RedisSpendLedger({ client: await client(), ...shared }), new RedisSpendLedger({ client: await client(), ...shared })];
  const party = `account:${newAccount()}`;
  await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? one : two).add([party], 3_750_000)));
  t.deepEqual((await one.spent([party])).spend, [{ day: 187_500_000n, month: 187_500_000n }]);
});

withRedis(test)('a Redis ledger whose counters are missing starts them from the spend before, once, however many processes read at once', async (t) => {
  const clock = testClock('2030-02-10T12:00:00.000Z');
  const party = `key:${newAccount()}`;
  let reads = 0;
  const spentBefore = async (asked: string, at: number) => {
    reads += 1;
    t.is(asked, party);
    // Today's spend before Redis counted it; on the next day, none yet.
    return budgetPeriods(at).day.id === '2030-02-10' ? { day: 300n, month: 320n } : { day: 0n, month: 320n };
  };
  const shared = { keyPrefix: keyPrefix(), nowMs: clock.nowMs, spentBefore };
  const [one, two] = [new RedisSpendLedger({ client: await client(), ...shared }), new RedisSpendLedger({ client: await client(), ...shared })];
  const read = await Promise.all([one.spent([party]), two.spent([party]), one.spent([party])]);
  t.deepEqual(
    read.map(({ spend }) => spend),
    Array.from({ length: 3 }, () => [{ day: 300n, month: 320n }]),
  );
  await two.add([party], 5);
  const readsBefore = reads;
  t.deepEqual((await one.spent([party])).spend, [{ day: 305n, month: 325n }]);
  t.is(reads, readsBefore, 'counters that are there are not read again');
  // A new day: its counter is missing, the month's is kept as Redis counted it.
  clock.ms += 86_400_000;
  t.deepEqual((await one.spent([party])).spend, [{ day: 0n, month: 325n }]);
});

withRedis(test)('a Redis counter another process wrote first is kept: the spend before is for counters nobody has', async (t) => {
  const clock = testClock('2030-02-10T12:00:00.000Z');
  const party = `account:${newAccount()}`;
  const prefix = keyPrefix();
  await new RedisSpendLedger({ client: await client(), keyPrefix: prefix, nowMs: clock.nowMs }).add([party], 7);
  const seeded = new RedisSpendLedger({
    client: await client(),
    keyPrefix: prefix,
    nowMs: clock.nowMs,
    spentBefore: () => Promise.reject(new Error('not asked')),
  });
  t.deepEqual((await seeded.spent([party])).spend, [{ day: 7n, month: 7n }]);
});

withRedis(test)(
  'a Redis that loses its data while calls are under way still holds the budget: the charge that finds no counter starts it from the usage records',
  async (t) => {
    const clock = testClock('2030-02-10T12:00:00.000Z');
    const prefix = keyPrefix();
    const redis = await client();
    const records = new MemoryUsageStore();
    const budgets = spendBudgets({
      ledger: new RedisSpendLedger({ client: redis, keyPrefix: prefix, nowMs: clock.nowMs, spentBefore: spendFromUsage(records) }),
    });
    const key = { id: newAccount(), account: newAccount() };
    const budget = { costPerDay: 3 };
    const callCost = 150_000_000_000; // 0.15 USD: 20 calls spend the budget
    // A call as the gateway makes one: checked, then charged and recorded when it ends.
    const end = async (parties: string[]) => {
      await budgets.charge(parties, callCost);
      await records.insert([usageRecord({ time: clock.ms, keyId: key.id, account: key.account, costPicoUsd: callCost })]);
    };
    for (let call = 0; call < 12; call++) await end((await budgets.check(key, budget)).parties);
    const inFlight = await Promise.all(Array.from({ length: 3 }, async () => (await budgets.check(key, budget)).parties));
    // Redis loses its data (this test's own keys only: the Redis is shared).
    await redis.del(...(await redis.keys(`${prefix}:*`)));
    for (const parties of inFlight) await end(parties);
    let passed = 0;
    for (let check = await budgets.check(key, budget); check.refusal === undefined; check = await budgets.check(key, budget)) {
      passed += 1;
      await end(check.parties);
      if (passed > 20) break;
    }
    t.is(passed, 5, '15 calls spent 2.25 USD: 5 more reach the 3 USD budget');
  },
);

withRedis(test)('a Redis counter another process started again while a charge read the usage records is kept, and added to', async (t) => {
  const clock = testClock('2030-02-10T12:00:00.000Z');
  const party = `key:${newAccount()}`;
  const shared = { client: await client(), keyPrefix: keyPrefix(), nowMs: clock.nowMs };
  const other = new RedisSpendLedger(shared);
  // The records this ledger reads are older than what the other process has counted meanwhile.
  const ledger = new RedisSpendLedger({
    ...shared,
    spentBefore: async () => {
      await other.add([party], 500);
      return { day: 100n, month: 100n };
    },
  });
  await ledger.add([party], 7);
  t.deepEqual((await ledger.spent([party])).spend, [{ day: 507n, month: 507n }]);
});

test('a memory ledger starts from what the usage records hold, this month and today, read once per party', async (t) => {
  const clock = testClock('2030-02-10T12:00:00.000Z');
  const records = new MemoryUsageStore();
  await records.insert([
    usageRecord({ time: Date.parse('2030-01-31T23:59:59.999Z'), keyId: 'key_a', account: 'acme', costPicoUsd: 1_000 }),
    usageRecord({ time: Date.parse('2030-02-01T00:00:00.000Z'), keyId: 'key_a', account: 'acme', costPicoUsd: 20 }),
    usageRecord({ time: Date.parse('2030-02-10T00:00:00.000Z'), keyId: 'key_a', account: 'acme', costPicoUsd: 300 }),
    usageRecord({ time: Date.parse('2030-02-10T08:00:00.000Z'), keyId: 'key_b', account: 'acme', costPicoUsd: 4_000 }),
  ]);
  let reads = 0;
  const fromUsage = spendFromUsage(records);
  const ledger = new MemorySpendLedger({
    nowMs: clock.nowMs,
    spentBefore: (party, at) => {
      reads += 1;
      return fromUsage(party, at);
    },
  });
  const [first] = await Promise.all([ledger.spent(['key:key_a', 'account:acme']), ledger.spent(['key:key_a'])]);
  t.deepEqual(first.spend, [
    { day: 300n, month: 320n },
    { day: 4_300n, month: 4_320n },
  ]);
  await ledger.add(['key:key_a'], 5);
  t.deepEqual((await ledger.spent(['key:key_a'])).spend, [{ day: 305n, month: 325n }]);
  t.is(reads, 2, 'once per party, concurrent reads sharing it');
});

test("a key's spend read from the usage records is that of its line of rotations: the key and every replacement", async (t) => {
  const clock = testClock('2030-02-10T12:00:00.000Z');
  const keys = new MemoryKeyStore();
  const records = new MemoryUsageStore();
  const original = await keys.create({ account: 'acme', hash: hashApiKey('kmg_sk_one'), scopes: [], models: null, expiresAt: null });
  const rotation = (hash: string) => ({ hash: hashApiKey(hash), nowSeconds: clock.ms / 1000, graceEndsAt: clock.ms / 1000 + 60 });
  const second = await keys.rotate(original.id, rotation('kmg_sk_two'));
  if (second.outcome !== 'rotated') return t.fail(second.outcome);
  const third = await keys.rotate(second.replacement.id, rotation('kmg_sk_three'));
  if (third.outcome !== 'rotated') return t.fail(third.outcome);
  t.is(third.replacement.originalId, original.id);
  await records.insert(
    [original.id, second.replacement.id, third.replacement.id, 'key_other'].map((keyId, index) =>
      usageRecord({ time: clock.ms, keyId, account: 'acme', costPicoUsd: 10 ** index }),
    ),
  );
  t.deepEqual(await spendFromUsage(records, keys)(`key:${original.id}`, clock.ms), { day: 111n, month: 111n });
  const budgets = spendBudgets({ ledger: new MemorySpendLedger({ nowMs: clock.nowMs, spentBefore: spendFromUsage(records, keys) }) });
  const check = await budgets.check({ id: third.replacement.id, account: 'acme', originalId: original.id }, { costPerDay: 111e-12 });
  t.like(check.refusal, { code: 'budget_exceeded' });
});

test('a memory ledger whose earlier spend cannot be read fails the read, and tries again at the next', async (t) => {
  let failing = true;
  const ledger = new MemorySpendLedger({ spentBefore: async () => (failing ? Promise.reject(new Error('database away')) : { day: 7n, month: 9n }) });
  await t.throwsAsync(ledger.spent(['key:x']), { message: 'database away' });
  failing = false;
  t.deepEqual((await ledger.spent(['key:x'])).spend, [{ day: 7n, month: 9n }]);
});

test('without any budget, nothing is read nor charged', async (t) => {
  const ledger: SpendLedger = {
    spent: () => Promise.reject(new Error('read')),
    add: () => Promise.reject(new Error('written')),
    reserve: () => Promise.reject(new Error('reserved')),
    release: () => Promise.reject(new Error('released')),
  };
  const budgets = spendBudgets({ ledger, accounts: new MemoryAccountBudgetStore() });
  const check = await budgets.check({ id: 'k', account: 'a' }, { tokensPerDay: 10 } as object);
  t.deepEqual(check, { parties: [] });
  await t.notThrowsAsync(budgets.charge(check.parties, 1000));
});

test("an account's budgets are read at most once per ttl; a failed read is not kept", async (t) => {
  const clock = testClock('2030-01-15T12:00:00.000Z');
  const store = new MemoryAccountBudgetStore();
  let reads = 0;
  let failing = false;
  const counted = {
    get: (account: string) => {
      reads += 1;
      return failing ? Promise.reject(new Error('down')) : store.get(account);
    },
  };
  const cached = cachedAccountBudgets(counted, { ttlMs: 1000, nowMs: clock.nowMs });
  await store.set('acme', { costPerDay: 5 });
  t.deepEqual(await cached.get('acme'), { costPerDay: 5 });
  await store.set('acme', { costPerDay: 7 });
  t.deepEqual(await cached.get('acme'), { costPerDay: 5 });
  clock.ms += 1000;
  t.deepEqual(await cached.get('acme'), { costPerDay: 7 });
  t.is(reads, 2);
  failing = true;
  clock.ms += 1000;
  await t.throwsAsync(cached.get('acme'), { message: 'down' });
  failing = false;
  t.deepEqual(await cached.get('acme'), { costPerDay: 7 });
});
