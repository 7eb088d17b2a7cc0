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
}
