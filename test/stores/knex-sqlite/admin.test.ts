import test from 'ava';
import { KnexAdminSessionStore } from '../../../lib/stores/knex/admin-session-store.js';
import { KnexAdminTokenStore } from '../../../lib/stores/knex/admin-token-store.js';
import { KnexAdminUserStore } from '../../../lib/stores/knex/admin-user-store.js';
import { KnexAuditStore } from '../../../lib/stores/knex/audit-store.js';
import { adminSessionStoreContract } from '../../../lib/testing/admin-session-store-contract.js';
import { adminTokenStoreContract } from '../../../lib/testing/admin-token-store-contract.js';
import { adminUserStoreContract } from '../../../lib/testing/admin-user-store-contract.js';
import { auditStoreContract } from '../../../lib/testing/audit-store-contract.js';
import { CONTRACT_STORE_OPTIONS, contractStores } from '../../helpers/contract-stores.js';
import { sqliteDatabase } from '../../helpers/services.js';

// The contracts of the admin tokens, sessions and users and of the audit trail on the Knex stores
// on SQLite; the other families in the files beside this one.

const stores = contractStores(test);

adminTokenStoreContract(test, 'sqlite KnexAdminTokenStore', async () => new KnexAdminTokenStore(await stores.migrated(sqliteDatabase), CONTRACT_STORE_OPTIONS));
adminSessionStoreContract(
  test,
  'sqlite KnexAdminSessionStore',
  async () => new KnexAdminSessionStore(await stores.migrated(sqliteDatabase), CONTRACT_STORE_OPTIONS),
);
adminUserStoreContract(test, 'sqlite KnexAdminUserStore', async () => new KnexAdminUserStore(await stores.migrated(sqliteDatabase), CONTRACT_STORE_OPTIONS));
auditStoreContract(test, 'sqlite KnexAuditStore', async () => new KnexAuditStore(await stores.migrated(sqliteDatabase), CONTRACT_STORE_OPTIONS));
