import test from 'ava';
import { KnexAuditStore } from '../../lib/stores/knex/audit-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { MemoryAuditStore } from '../../lib/stores/memory/audit-store.js';
import { auditStoreContract } from '../../lib/testing/audit-store-contract.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';

const databases: TestDatabase[] = [];
test.after.always(() => Promise.all(databases.map((db) => db.destroy())));

async function migrated(open: () => Promise<TestDatabase>) {
  const db = await open();
  databases.push(db);
  await migrate(db.knex);
  return db.knex;
}

auditStoreContract(test, 'memory', async () => new MemoryAuditStore());
auditStoreContract(test, 'sqlite', async () => new KnexAuditStore(await migrated(sqliteDatabase)));
auditStoreContract(withPostgres(test), 'postgres', async () => new KnexAuditStore(await migrated(postgresDatabase)));
