import test from 'ava';
import { KnexAccountBudgetStore } from '../../lib/stores/knex/account-budget-store.js';
import { KnexAdminSessionStore } from '../../lib/stores/knex/admin-session-store.js';
import { KnexAdminUserStore } from '../../lib/stores/knex/admin-user-store.js';
import { KnexAdminTokenStore } from '../../lib/stores/knex/admin-token-store.js';
import { KnexAuditStore } from '../../lib/stores/knex/audit-store.js';
import { accountBudgetStoreContract } from '../../lib/testing/account-budget-store-contract.js';
import { adminSessionStoreContract } from '../../lib/testing/admin-session-store-contract.js';
import { adminUserStoreContract } from '../../lib/testing/admin-user-store-contract.js';
import { adminTokenStoreContract } from '../../lib/testing/admin-token-store-contract.js';
import { auditStoreContract } from '../../lib/testing/audit-store-contract.js';
import { fileStoreContract } from '../../lib/testing/file-store-contract.js';
import { keyChangesContract } from '../../lib/testing/key-changes-contract.js';
import { keyRotationContract, keyStoreContract } from '../../lib/testing/key-store-contract.js';
import { usageStoreContract } from '../../lib/testing/usage-store-contract.js';
import { CONTRACT_STORE_OPTIONS, contractStores, partialBatchStoresNothing, rotationAcrossProcesses } from '../helpers/contract-stores.js';
import { fewAtOnce, postgresDatabase, withPostgres } from '../helpers/services.js';

// Every store family's contract on the Knex stores on PostgreSQL, on a thread of their own
// (contract-stores says why). Five tests at a time, each on a pool of its own: the file holds a few
// dozen connections at most, not one pool for each of its hundred tests (docs/TESTING.md).

const postgres = fewAtOnce(withPostgres(test), 5);
const stores = contractStores(test);

adminTokenStoreContract(
  postgres,
  'postgres KnexAdminTokenStore',
  async () => new KnexAdminTokenStore(await stores.migrated(postgresDatabase), CONTRACT_STORE_OPTIONS),
);
adminSessionStoreContract(
  postgres,
  'postgres KnexAdminSessionStore',
  async () => new KnexAdminSessionStore(await stores.migrated(postgresDatabase), CONTRACT_STORE_OPTIONS),
);
adminUserStoreContract(
  postgres,
  'postgres KnexAdminUserStore',
  async () => new KnexAdminUserStore(await stores.migrated(postgresDatabase), CONTRACT_STORE_OPTIONS),
);
auditStoreContract(postgres, 'postgres KnexAuditStore', async () => new KnexAuditStore(await stores.migrated(postgresDatabase), CONTRACT_STORE_OPTIONS));

keyStoreContract(postgres, 'postgres KnexKeyStore', () => stores.keyStore(postgresDatabase));
keyStoreContract(postgres, 'postgres KnexKeyStore, prepared reads', () => stores.keyStore(postgresDatabase, { prepared: true }));
keyRotationContract(postgres, 'postgres KnexKeyStore', () => stores.keyViews(postgresDatabase));
rotationAcrossProcesses(postgres, 'postgres KnexKeyStore', stores, postgresDatabase);
keyChangesContract(postgres, 'postgres KnexKeyChanges', () => stores.keyChangesPair(postgresDatabase));

usageStoreContract(postgres, 'postgres KnexUsageStore', () => stores.usageStore(postgresDatabase));
partialBatchStoresNothing(postgres, 'postgres KnexUsageStore', () => stores.usageStore(postgresDatabase));
accountBudgetStoreContract(postgres, 'postgres KnexAccountBudgetStore', async () => new KnexAccountBudgetStore(await stores.migrated(postgresDatabase)));

const seed = { seed: stores.seedFiles };
fileStoreContract(postgres, 'postgres KnexFileStore', () => stores.fileStore(postgresDatabase), seed);
fileStoreContract(postgres, 'postgres KnexFileStore, prepared reads', () => stores.fileStore(postgresDatabase, { prepared: true }), seed);

postgres('postgres: file ids are stored in the "C" collation, so index order is byte order', async (t) => {
  const knex = await stores.migrated(postgresDatabase);
  const result = await knex.raw<{ rows: { collation_name: string }[] }>(
    `select collation_name from information_schema.columns
     where table_schema = current_schema() and table_name = 'kmg_files' and column_name = 'id'`,
  );
  t.deepEqual(result.rows, [{ collation_name: 'C' }]);
});
