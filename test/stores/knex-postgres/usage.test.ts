import test from 'ava';
import { KnexAccountBudgetStore } from '../../../lib/stores/knex/account-budget-store.js';
import { accountBudgetStoreContract } from '../../../lib/testing/account-budget-store-contract.js';
import { usageStoreContract } from '../../../lib/testing/usage-store-contract.js';
import { contractStores, partialBatchStoresNothing, POSTGRES_CONTRACT_TESTS_AT_ONCE } from '../../helpers/contract-stores.js';
import { fewAtOnce, postgresDatabase, withPostgres } from '../../helpers/services.js';

// The contracts of the usage store and the account budgets on the Knex stores on PostgreSQL; the
// other families in the files beside this one (contract-stores says why).

const stores = contractStores(test);
const postgres = stores.eachTestCloses(fewAtOnce(withPostgres(test), POSTGRES_CONTRACT_TESTS_AT_ONCE));

usageStoreContract(postgres, 'postgres KnexUsageStore', () => stores.usageStore(postgresDatabase));
partialBatchStoresNothing(postgres, 'postgres KnexUsageStore', () => stores.usageStore(postgresDatabase));
accountBudgetStoreContract(postgres, 'postgres KnexAccountBudgetStore', async () => new KnexAccountBudgetStore(await stores.migrated(postgresDatabase)));
