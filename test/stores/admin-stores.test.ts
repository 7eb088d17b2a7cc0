import test from 'ava';
import { KnexAdminSessionStore } from '../../lib/stores/knex/admin-session-store.js';
import { KnexAdminTokenStore } from '../../lib/stores/knex/admin-token-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { MemoryAdminSessionStore } from '../../lib/stores/memory/admin-session-store.js';
import { MemoryAdminTokenStore } from '../../lib/stores/memory/admin-token-store.js';
import { adminSessionStoreContract } from '../../lib/testing/admin-session-store-contract.js';
import { adminTokenStoreContract } from '../../lib/testing/admin-token-store-contract.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';

const databases: TestDatabase[] = [];
test.after.always(() => Promise.all(databases.map((db) => db.destroy())));

async function migrated(open: () => Promise<TestDatabase>) {
  const db = await open();
  databases.push(db);
  await migrate(db.knex);
  return db.knex;
}

adminTokenStoreContract(test, 'memory', async () => new MemoryAdminTokenStore());
adminTokenStoreContract(test, 'sqlite', async () => new KnexAdminTokenStore(await migrated(sqliteDatabase)));
adminTokenStoreContract(withPostgres(test), 'postgres', async () => new KnexAdminTokenStore(await migrated(postgresDatabase)));

adminSessionStoreContract(test, 'memory', async () => new MemoryAdminSessionStore());
adminSessionStoreContract(test, 'sqlite', async () => new KnexAdminSessionStore(await migrated(sqliteDatabase)));
adminSessionStoreContract(withPostgres(test), 'postgres', async () => new KnexAdminSessionStore(await migrated(postgresDatabase)));
