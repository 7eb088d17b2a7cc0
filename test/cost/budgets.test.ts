import test, { type ExecutionContext, type TestFn } from 'ava';
import { MemoryAccountBudgetStore, cachedAccountBudgets, type AccountBudgetStore } from '../../lib/cost/account-budget-store.js';
import { MemorySpendLedger, budgetPeriods, spendBudgets, spendFromUsage, type SpendLedger } from '../../lib/cost/budgets.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';
import { GatewayError } from '../../lib/errors/gateway-error.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { KnexAccountBudgetStore } from '../../lib/stores/knex/account-budget-store.js';
import { RedisSpendLedger } from '../../lib/stores/redis/spend-ledger.js';
import { newAccount, testClock, type TestClock } from '../../lib/testing/creation-limiter-contract.js';
import { redisClients } from '../helpers/redis-clients.js';
import { postgresDatabase, sqliteDatabase, withPostgres, withRedis, type TestDatabase } from '../helpers/services.js';

const { client, keyPrefix } = redisClients(test);
const USD = 1_000_000_000_000n;

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

/** The behaviour of every SpendLedger, on its clock. */
function ledgerContract(suite: TestFn, name: string, make: (clock: TestClock) => Promise<SpendLedger>): void {
  suite(`${name}: spend counts per party in the UTC day and month; a new day starts the day again, a new month both`, async (t) => {
    const clock = testClock('2030-01-31T23:00:00.000Z');
    const ledger = await make(clock);
    const [key, account] = [`key:${newAccount()}`, `account:${newAccount()}`];
    await ledger.add([key, account], 300_000);
    await ledger.add([account], 9_007_199_254_740_991);
    t.deepEqual(await ledger.spent([key, account]), {
      at: clock.ms,
      spend: [
        { day: 300_000n, month: 300_000n },
        { day: 9_007_199_255_040_991n, month: 9_007_199_255_040_991n },
      ],
    });
    // Past the month's last midnight (the clock passed in): a new day and a new month.
    clock.ms = Date.parse('2030-02-01T00:00:00.000Z');
    t.deepEqual((await ledger.spent([key, account])).spend, [
      { day: 0n, month: 0n },
      { day: 0n, month: 0n },
    ]);
    await ledger.add([key], 1);
    clock.ms = Date.parse('2030-02-02T08:00:00.000Z');
    t.deepEqual((await ledger.spent([key])).spend, [{ day: 0n, month: 1n }]);
  });

  suite(`${name}: a cost that cannot be one is a TypeError`, async (t) => {
    const ledger = await make(testClock('2030-01-15T12:00:00.000Z'));
    for (const bad of [-1, 1.5, Number.NaN]) await t.throwsAsync(ledger.add(['key:x'], bad), { instanceOf: TypeError });
  });

  suite(`${name}: a budget refuses once the spend reaches it, until the period ends (the month's, at the month boundary)`, async (t) => {
    const clock = testClock('2030-01-31T23:59:00.000Z');
    const accounts = new MemoryAccountBudgetStore();
    const budgets = spendBudgets({ ledger: await make(clock), accounts });
    const key = { id: newAccount(), account: newAccount() };
    await accounts.set(key.account, { costPerMonth: 2 });
    const first = await budgets.check(key, { costPerDay: 1 });
    t.deepEqual(first, { parties: [`key:${key.id}`, `account:${key.account}`] });
    await budgets.charge(first.parties, Number(USD) - 1);
    t.is((await budgets.check(key, { costPerDay: 1 })).refusal, undefined, 'one picodollar short of the budget');
    await budgets.charge(first.parties, 1);
    const day = (await budgets.check(key, { costPerDay: 1 })).refusal;
    t.true(day instanceof GatewayError);
    t.like(day, { status: 429, type: 'rate_limit_error', code: 'budget_exceeded', message: "Budget exceeded: the key's daily budget of 1 USD is spent", headers: { 'retry-after': '60' } });
    await budgets.charge(first.parties, Number(USD));
    // Both reached, ending at the same midnight: the first is named, the key's before the account's.
    t.like((await budgets.check(key, { costPerDay: 1 })).refusal, { message: "Budget exceeded: the key's daily budget of 1 USD is spent", headers: { 'retry-after': '60' } });
    t.like((await budgets.check(key, {})).refusal, { message: "Budget exceeded: the account's monthly budget of 2 USD is spent", headers: { 'retry-after': '60' } });
    clock.ms = Date.parse('2030-02-01T00:00:00.000Z');
    t.is((await budgets.check(key, { costPerDay: 1 })).refusal, undefined, 'a new month, a new budget');
  });
}

ledgerContract(test, 'memory', async (clock) => new MemorySpendLedger({ nowMs: clock.nowMs }));
ledgerContract(withRedis(test), 'redis', async (clock) => new RedisSpendLedger({ client: await client(), keyPrefix: keyPrefix(), nowMs: clock.nowMs }));

withRedis(test)('two processes sharing Redis see each other\'s spend', async (t) => {
  const clock = testClock('2030-01-15T12:00:00.000Z');
  const shared = { keyPrefix: keyPrefix(), nowMs: clock.nowMs };
  const [one, two] = [new RedisSpendLedger({ client: await client(), ...shared }), new RedisSpendLedger({ client: await client(), ...shared })];
  const party = `account:${newAccount()}`;
  await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? one : two).add([party], 3_750_000)));
  t.deepEqual((await one.spent([party])).spend, [{ day: 187_500_000n, month: 187_500_000n }]);
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

function accountStoreContract(suite: TestFn, name: string, make: (t: ExecutionContext) => Promise<AccountBudgetStore>): void {
  suite(`${name}: an account's budgets are set, kept field by field, removed with null; an unknown account has none`, async (t) => {
    const store = await make(t);
    t.deepEqual(await store.get('nobody'), {});
    t.deepEqual(await store.set('acme', { costPerDay: 5, costPerMonth: 49.95 }), { costPerDay: 5, costPerMonth: 49.95 });
    t.deepEqual(await store.set('acme', { costPerDay: null }), { costPerMonth: 49.95 });
    t.deepEqual(await store.set('acme', {}), { costPerMonth: 49.95 });
    t.deepEqual(await store.get('acme'), { costPerMonth: 49.95 });
    t.deepEqual(await store.get('ācme "quoted"'), {});
  });
}

const knexStore = (open: () => Promise<TestDatabase>) => async (t: ExecutionContext) => {
  const database = await open();
  t.teardown(() => database.destroy());
  await migrate(database.knex);
  return new KnexAccountBudgetStore(database.knex);
};

accountStoreContract(test, 'memory', async () => new MemoryAccountBudgetStore());
accountStoreContract(test, 'sqlite', knexStore(() => sqliteDatabase()));
accountStoreContract(withPostgres(test), 'postgres', knexStore(() => postgresDatabase()));
