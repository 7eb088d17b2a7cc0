import { MemoryAccountBudgetStore } from '../stores/memory/account-budget-store.js';
import { spendBudgets, type SpendLedger, type SpentBefore } from '../cost/budgets.js';
import { GatewayError } from '../errors/gateway-error.js';
import { newAccount, testClock } from './creation-limiter-contract.js';
import type { StoreContractTest } from './store-contract-test.js';

const USD = 1_000_000_000_000n;

/**
 * The behaviour every SpendLedger must have (decisions.md, budgets): spend per party in the UTC day
 * and month, in picodollars, and the refusals `spendBudgets()` makes on it; run once per
 * implementation. `makeLedger` gets the suite's clock, and the ledger's `spentBefore` when a test gives one.
 */
export function spendLedgerContract(
  test: StoreContractTest,
  name: string,
  makeLedger: (nowMs: () => number, spentBefore?: SpentBefore) => Promise<SpendLedger>,
): void {
  test(`${name}: spend counts per party in the UTC day and month; a new day starts the day again, a new month both`, async (t) => {
    const clock = testClock('2030-01-31T23:00:00.000Z');
    const ledger = await makeLedger(clock.nowMs);
    const [key, account] = [`key:${newAccount()}`, `account:${newAccount()}`];
    await ledger.add([key, account], 300_000);
    await ledger.add([account], 9_007_199_254_740_991);
    t.deepEqual(await ledger.spent([key, account]), {
      at: clock.ms,
      spend: [
        { day: 300_000n, month: 300_000n },
        { day: 9_007_199_255_040_991n, month: 9_007_199_255_040_991n },
      ],
      held: [0n, 0n],
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

  test(`${name}: a cost that cannot be one is a TypeError`, async (t) => {
    const ledger = await makeLedger(testClock('2030-01-15T12:00:00.000Z').nowMs);
    for (const bad of [-1, 1.5, Number.NaN]) await t.throwsAsync(ledger.add(['key:x'], bad), { instanceOf: TypeError });
  });

  test(`${name}: a budget refuses once the spend reaches it, until the period ends (the month's, at the month boundary)`, async (t) => {
    const clock = testClock('2030-01-31T23:59:00.000Z');
    const accounts = new MemoryAccountBudgetStore();
    const budgets = spendBudgets({ ledger: await makeLedger(clock.nowMs), accounts });
    const key = { id: newAccount(), account: newAccount() };
    await accounts.set(key.account, { costPerMonth: 2 });
    const first = await budgets.check(key, { costPerDay: 1 });
    t.like(first, { parties: [`key:${key.id}`, `account:${key.account}`], remainingPicoUsd: USD });
    await budgets.charge(first.parties, Number(USD) - 1);
    t.is((await budgets.check(key, { costPerDay: 1 })).refusal, undefined, 'one picodollar short of the budget');
    await budgets.charge(first.parties, 1);
    const day = (await budgets.check(key, { costPerDay: 1 })).refusal;
    t.true(day instanceof GatewayError);
    t.like(day, {
      status: 429,
      type: 'rate_limit_error',
      code: 'budget_exceeded',
      message: "Budget exceeded: the key's daily budget of 1 USD is spent; it resets at 2030-02-01T00:00:00Z",
      headers: { 'retry-after': '60' },
    });
    await budgets.charge(first.parties, Number(USD));
    // Both reached, ending at the same midnight: the first is named, the key's before the account's.
    t.like((await budgets.check(key, { costPerDay: 1 })).refusal, {
      message: "Budget exceeded: the key's daily budget of 1 USD is spent; it resets at 2030-02-01T00:00:00Z",
      headers: { 'retry-after': '60' },
    });
    t.like((await budgets.check(key, {})).refusal, {
      message: "Budget exceeded: the account's monthly budget of 2 USD is spent; it resets at 2030-02-01T00:00:00Z",
      headers: { 'retry-after': '60' },
    });
    clock.ms = Date.parse('2030-02-01T00:00:00.000Z');
    t.is((await budgets.check(key, { costPerDay: 1 })).refusal, undefined, 'a new month, a new budget');
  });

  test(`${name}: with spentBefore, what a party spent before counts however its spend is first met: read, or added to (a counter lost with a call under way)`, async (t) => {
    const clock = testClock('2030-01-15T12:00:00.000Z');
    const spentBefore: SpentBefore = async () => ({ day: 100n, month: 150n });
    const ledger = await makeLedger(clock.nowMs, spentBefore);
    const [read, added] = [`key:${newAccount()}`, `key:${newAccount()}`];
    t.deepEqual((await ledger.spent([read])).spend, [{ day: 100n, month: 150n }]);
    await ledger.add([read], 5);
    await ledger.add([added], 5);
    t.deepEqual((await ledger.spent([read, added])).spend, [
      { day: 105n, month: 155n },
      { day: 105n, month: 155n },
    ]);
  });

  test(`${name}: a reservation holds its cost until released, refused when it does not fit a limit, at least one picodollar`, async (t) => {
    const clock = testClock('2030-01-15T12:00:00.000Z');
    const ledger = await makeLedger(clock.nowMs);
    const [key, account] = [`key:${newAccount()}`, `account:${newAccount()}`];
    await ledger.add([key], 100);
    const limits = [
      { party: key, day: 1_000n },
      { party: account, month: 500n },
    ];
    const held = await ledger.reserve(limits, 400, 60_000);
    t.like(held, {
      at: clock.ms,
      spend: [
        { day: 100n, month: 100n },
        { day: 0n, month: 0n },
      ],
    });
    t.is(typeof held.reservation, 'string');
    t.like(await ledger.spent([key, account]), {
      spend: [
        { day: 100n, month: 100n },
        { day: 0n, month: 0n },
      ],
      held: [400n, 400n],
    });
    // The account has 100 left: 101 does not fit, and the key's hold made on the way is released.
    const refused = await ledger.reserve(limits, 101, 60_000);
    t.is(refused.reservation, undefined);
    t.deepEqual(refused.spend[1], { day: 400n, month: 400n });
    t.deepEqual((await ledger.spent([key, account])).held, [400n, 400n]);
    const fits = await ledger.reserve(limits, 100, 60_000);
    t.is(typeof fits.reservation, 'string');
    // Spent to the limit: a call of no cost is refused too (one picodollar at least).
    t.is((await ledger.reserve([{ party: account, month: 500n }], 0, 60_000)).reservation, undefined);
    await ledger.release([key, account], held.reservation as string);
    await ledger.release([key, account], fits.reservation as string);
    t.deepEqual((await ledger.spent([key, account])).held, [0n, 0n]);
    t.is(typeof (await ledger.reserve(limits, 500, 60_000)).reservation, 'string');
  });

  test(`${name}: calls reserving at once never hold more than the limit: exactly as many as fit`, async (t) => {
    const ledger = await makeLedger(testClock('2030-01-15T12:00:00.000Z').nowMs);
    const limits = [{ party: `key:${newAccount()}`, day: 7_000n, month: 7_500n }];
    const answers = await Promise.all(Array.from({ length: 20 }, () => ledger.reserve(limits, 1_000, 60_000)));
    t.is(answers.filter(({ reservation }) => reservation !== undefined).length, 7);
  });

  test(`${name}: a reservation never released (its process died) lapses after its ttl`, async (t) => {
    const clock = testClock('2030-01-15T12:00:00.000Z');
    const ledger = await makeLedger(clock.nowMs);
    const limits = [{ party: `account:${newAccount()}`, day: 1_000n }];
    t.is(typeof (await ledger.reserve(limits, 1_000, 30_000)).reservation, 'string');
    clock.ms += 29_999;
    t.is((await ledger.reserve(limits, 1, 30_000)).reservation, undefined);
    clock.ms += 1;
    t.deepEqual((await ledger.spent([limits[0]?.party as string])).held, [0n]);
    t.is(typeof (await ledger.reserve(limits, 1_000, 30_000)).reservation, 'string');
  });
}
