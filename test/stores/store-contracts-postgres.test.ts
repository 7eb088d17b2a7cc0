import test from 'ava';
import { KnexAdminSessionStore } from '../../lib/stores/knex/admin-session-store.js';
import { KnexAdminTokenStore } from '../../lib/stores/knex/admin-token-store.js';
import { KnexAdminUserStore } from '../../lib/stores/knex/admin-user-store.js';
import { KnexAuditStore } from '../../lib/stores/knex/audit-store.js';
import { adminSessionStoreContract } from '../../lib/testing/admin-session-store-contract.js';
import { adminTokenStoreContract } from '../../lib/testing/admin-token-store-contract.js';
import { adminUserStoreContract } from '../../lib/testing/admin-user-store-contract.js';
import { auditStoreContract } from '../../lib/testing/audit-store-contract.js';
import { keyRotationContract, keyStoreContract } from '../../lib/testing/key-store-contract.js';
import { usageStoreContract } from '../../lib/testing/usage-store-contract.js';
import { CONTRACT_STORE_OPTIONS, contractStores, partialBatchStoresNothing, rotationAcrossProcesses } from '../helpers/contract-stores.js';
import { postgresDatabase, withPostgres } from '../helpers/services.js';

// The contracts of store-contracts on PostgreSQL, on a thread of their own (contract-stores says why).

const postgres = withPostgres(test);
const stores = contractStores(test);

adminTokenStoreContract(postgres, 'postgres', async () => new KnexAdminTokenStore(await stores.migrated(postgresDatabase), CONTRACT_STORE_OPTIONS));
adminSessionStoreContract(postgres, 'postgres', async () => new KnexAdminSessionStore(await stores.migrated(postgresDatabase), CONTRACT_STORE_OPTIONS));
adminUserStoreContract(postgres, 'postgres', async () => new KnexAdminUserStore(await stores.migrated(postgresDatabase), CONTRACT_STORE_OPTIONS));
auditStoreContract(postgres, 'postgres', async () => new KnexAuditStore(await stores.migrated(postgresDatabase), CONTRACT_STORE_OPTIONS));

keyStoreContract(postgres, 'postgres', () => stores.keyStore(postgresDatabase));
keyStoreContract(postgres, 'postgres, prepared reads', () => stores.keyStore(postgresDatabase, { prepared: true }));
keyRotationContract(postgres, 'postgres', () => stores.keyViews(postgresDatabase));
rotationAcrossProcesses(postgres, 'postgres', stores, postgresDatabase);

usageStoreContract(postgres, 'postgres', () => stores.usageStore(postgresDatabase));
partialBatchStoresNothing(postgres, 'postgres', () => stores.usageStore(postgresDatabase));
