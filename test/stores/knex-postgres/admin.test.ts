import test from 'ava';
import { KnexAdminSessionStore } from '../../../lib/stores/knex/admin-session-store.js';
import { KnexAdminTokenStore } from '../../../lib/stores/knex/admin-token-store.js';
import { KnexAdminUserStore } from '../../../lib/stores/knex/admin-user-store.js';
import { KnexAuditStore } from '../../../lib/stores/knex/audit-store.js';
import { adminSessionStoreContract } from '../../../lib/testing/admin-session-store-contract.js';
import { adminTokenStoreContract } from '../../../lib/testing/admin-token-store-contract.js';
import { adminUserStoreContract } from '../../../lib/testing/admin-user-store-contract.js';
import { auditStoreContract } from '../../../lib/testing/audit-store-contract.js';
import { CONTRACT_STORE_OPTIONS, contractStores, POSTGRES_CONTRACT_TESTS_AT_ONCE } from '../../helpers/contract-stores.js';
import { fewAtOnce, postgresDatabase, withPostgres } from '../../helpers/services.js';

// The contracts of the admin tokens, sessions and users and of the audit trail on the Knex stores
// on PostgreSQL; the other families in the files beside this one (contract-stores says why).

const stores = contractStores(test);
const postgres = stores.eachTestCloses(fewAtOnce(withPostgres(test), POSTGRES_CONTRACT_TESTS_AT_ONCE));

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
