import test from 'ava';
import { cachedKeyStore } from '../../lib/auth/cached-key-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { keyStoreContract } from '../contracts/key-store.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';

const databases: TestDatabase[] = [];
test.after.always(async () => {
  await Promise.all(databases.map((db) => db.destroy()));
});

async function knexStore(open: () => Promise<TestDatabase>) {
  const db = await open();
  databases.push(db);
  await migrate(db.knex);
  return new KnexKeyStore(db.knex);
}

keyStoreContract(test, 'memory', async () => new MemoryKeyStore());
keyStoreContract(test, 'sqlite', () => knexStore(sqliteDatabase));
keyStoreContract(withPostgres(test), 'postgres', () => knexStore(postgresDatabase));
keyStoreContract(test, 'memory behind cachedKeyStore', async () => cachedKeyStore(new MemoryKeyStore()));
keyStoreContract(test, 'sqlite behind cachedKeyStore', async () => cachedKeyStore(await knexStore(sqliteDatabase)));
