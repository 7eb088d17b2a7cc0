import test from 'ava';
import { cachedKeyStore } from '../../lib/auth/cached-key-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { keyStoreContract } from '../contracts/key-store.js';
import { preparedReadsOn, type TestPreparedReads } from '../helpers/prepared-reads.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';

const databases: TestDatabase[] = [];
const readers: TestPreparedReads[] = [];
test.after.always(async () => {
  await Promise.all(readers.map((reader) => reader.close()));
  await Promise.all(databases.map((db) => db.destroy()));
});

async function knexStore(open: () => Promise<TestDatabase>, { prepared = false } = {}) {
  const db = await open();
  databases.push(db);
  await migrate(db.knex);
  const reader = prepared ? preparedReadsOn(db) : undefined;
  if (reader) readers.push(reader);
  return new KnexKeyStore(db.knex, reader ? { preparedReads: reader.reads } : {});
}

keyStoreContract(test, 'memory', async () => new MemoryKeyStore());
keyStoreContract(test, 'sqlite', () => knexStore(sqliteDatabase));
keyStoreContract(test, 'sqlite, prepared reads', () => knexStore(sqliteDatabase, { prepared: true }));
keyStoreContract(withPostgres(test), 'postgres', () => knexStore(postgresDatabase));
keyStoreContract(withPostgres(test), 'postgres, prepared reads', () => knexStore(postgresDatabase, { prepared: true }));
keyStoreContract(test, 'memory behind cachedKeyStore', async () => cachedKeyStore(new MemoryKeyStore()));
keyStoreContract(test, 'sqlite behind cachedKeyStore', async () => cachedKeyStore(await knexStore(sqliteDatabase)));

test('the Knex stores refuse a timeoutMs that is not a positive integer of milliseconds, when they are made', async (t) => {
  const db = await sqliteDatabase();
  databases.push(db);
  for (const timeoutMs of [0, -1, 1.5, Number.NaN]) {
    t.throws(() => new KnexKeyStore(db.knex, { timeoutMs }), { instanceOf: TypeError, message: /timeoutMs/ });
    t.throws(() => new KnexFileStore(db.knex, { timeoutMs }), { instanceOf: TypeError, message: /timeoutMs/ });
  }
});
