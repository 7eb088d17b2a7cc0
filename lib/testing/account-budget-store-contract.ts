import type { AccountBudgetStore } from '../cost/account-budget-store.js';
import type { StoreContractTest } from './store-contract-test.js';

/** The behaviour every AccountBudgetStore must have; run once per implementation. */
export function accountBudgetStoreContract(test: StoreContractTest, name: string, makeStore: () => Promise<AccountBudgetStore>): void {
  test(`${name}: an account's budgets are set, kept field by field, removed with null; an unknown account has none`, async (t) => {
    const store = await makeStore();
    t.deepEqual(await store.get('nobody'), {});
    t.deepEqual(await store.set('acme', { costPerDay: 5, costPerMonth: 49.95 }), { costPerDay: 5, costPerMonth: 49.95 });
    t.deepEqual(await store.set('acme', { costPerDay: null }), { costPerMonth: 49.95 });
    t.deepEqual(await store.set('acme', {}), { costPerMonth: 49.95 });
    t.deepEqual(await store.get('acme'), { costPerMonth: 49.95 });
    t.deepEqual(await store.get('ācme "quoted"'), {});
  });

  test(`${name}: an account's budgets are made soft and given their own alert thresholds, each kept until changed, removed with null`, async (t) => {
    const store = await makeStore();
    t.deepEqual(await store.set('acme', { costPerDay: 5, costSoft: true, costAlertThresholds: [25, 100] }), {
      costPerDay: 5,
      costSoft: true,
      costAlertThresholds: [25, 100],
    });
    t.deepEqual(await store.set('acme', { costPerDay: 6 }), { costPerDay: 6, costSoft: true, costAlertThresholds: [25, 100] });
    t.deepEqual(await store.get('acme'), { costPerDay: 6, costSoft: true, costAlertThresholds: [25, 100] });
    t.deepEqual(await store.set('acme', { costSoft: false, costAlertThresholds: null }), { costPerDay: 6 });
    t.deepEqual(await store.set('soft-only', { costSoft: true }), { costSoft: true });
    t.deepEqual(await store.set('soft-only', { costSoft: null }), {});
    // What a store hands out is a copy.
    (await store.set('acme', { costAlertThresholds: [80] })).costAlertThresholds?.push(98);
    (await store.get('acme')).costAlertThresholds?.push(99);
    t.deepEqual(await store.get('acme'), { costPerDay: 6, costAlertThresholds: [80] });
  });
}
