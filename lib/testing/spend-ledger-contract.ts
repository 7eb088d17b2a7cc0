import { MemoryAccountBudgetStore } from '../stores/memory/account-budget-store.js';
import { spendBudgets, type SpendLedger } from '../cost/budgets.js';
import { GatewayError } from '../errors/gateway-error.js';
import { newAccount, testClock } from './creation-limiter-contract.js';
import type { StoreContractTest } from './store-contract-test.js';

const USD = 1_000_000_000_000n;

/**
 * The behaviour every SpendLedger must have (decisions.md, budgets): spend per party in the UTC day
 * and month, in picodollars, and the refusals `spendBudgets()` makes on it; run once per
 * implementation. `makeLedger` gets the suite's clock.
 */
export function spendLedgerContract(test: StoreContractTest, name: string, makeLedger: (nowMs: () => number) => Promise<SpendLedger>): void {
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
