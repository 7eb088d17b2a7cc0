import test from 'ava';
import knexFactory from 'knex';
import { sqliteWriter, SqliteWriterGoneError } from '../../lib/stores/knex/sqlite-writer.js';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { usageRecord, usageStoreContract } from '../../lib/testing/usage-store-contract.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';

const databases: TestDatabase[] = [];
const writers: Array<{ close(): Promise<void> }> = [];
// A writer that failed would leave its store on Knex: the contract would not have tested it.
const writerFailures: Error[] = [];
test.after.always(async () => {
  await Promise.all(writers.map((writer) => writer.close()));
  await Promise.all(databases.map((db) => db.destroy()));
  if (writerFailures.length > 0) throw new Error('a SQLite writer thread failed', { cause: writerFailures[0] });
});

async function knexStore(open: () => Promise<TestDatabase>): Promise<KnexUsageStore> {
  const db = await open();
  databases.push(db);
  await migrate(db.knex);
  return new KnexUsageStore(db.knex);
}

/** A migrated SQLite database, and its file for a writer thread's connection. */
async function migratedSqlite(): Promise<{ db: TestDatabase; filename: string }> {
  const db = await sqliteDatabase();
  databases.push(db);
  await migrate(db.knex);
  return { db, filename: (db.config.connection as { filename: string }).filename };
}

/** A writer thread on `filename`, closed after the tests; its failure fails them. */
function writerOn(filename: string) {
  const writer = sqliteWriter(filename, { onFailure: (err) => writerFailures.push(err) });
  writers.push(writer);
  return writer;
}

/** SQLite with the inserts run by a `sqliteWriter`: its worker thread's connection, the reads Knex's. */
async function sqliteWriterStore(): Promise<KnexUsageStore> {
  const { db, filename } = await migratedSqlite();
  return new KnexUsageStore(db.knex, { preparedWrites: writerOn(filename) });
}

usageStoreContract(test, 'memory', async () => new MemoryUsageStore());
usageStoreContract(test, 'sqlite', () => knexStore(sqliteDatabase));
usageStoreContract(test, 'sqlite with a writer thread', sqliteWriterStore);
usageStoreContract(withPostgres(test), 'postgres', () => knexStore(postgresDatabase));

// The recorder tries a failed batch again: a batch stored in part would then be counted twice.
for (const [name, gate, open] of [
  ['sqlite', test, () => knexStore(sqliteDatabase)],
  ['sqlite with a writer thread', test, sqliteWriterStore],
  ['postgres', withPostgres(test), () => knexStore(postgresDatabase)],
] as const) {
  gate(`${name}: a batch with one record the database refuses (its 651st) stores nothing`, async (t) => {
    const store = await open();
    const batch = Array.from({ length: 700 }, () => usageRecord());
    batch[650] = { ...usageRecord(), account: null as unknown as string };
    await t.throwsAsync(store.insert(batch), { any: true });
    t.deepEqual(await store.list(), []);
  });
}

test('sqlite: once its writer thread is gone, inserts go through Knex, and none is lost', async (t) => {
  const { db, filename } = await migratedSqlite();
  const failures: Error[] = [];
  const writer = sqliteWriter(filename, { onFailure: (err) => failures.push(err) });
  const store = new KnexUsageStore(db.knex, { preparedWrites: writer });
  const first = usageRecord();
  await store.insert([first]);
  await writer.close();
  await t.throwsAsync(writer.prepare('select 1')([]), { instanceOf: SqliteWriterGoneError });
  const second = usageRecord();
  await store.insert([second]);
  t.deepEqual((await store.list()).map((record) => record.requestId).sort(), [first.requestId, second.requestId].sort());
  t.deepEqual(failures, [], 'a writer closed by its owner has not failed');
});

test('sqlite: with a writer thread, inserts run on its connection: the store needs no write access of its own', async (t) => {
  const { filename } = await migratedSqlite();
  const readOnly = knexFactory({ client: 'better-sqlite3', connection: { filename, options: { readonly: true } }, useNullAsDefault: true });
  t.teardown(() => readOnly.destroy());
  const writer = writerOn(filename);
  const record = usageRecord();
  await t.throwsAsync(new KnexUsageStore(readOnly).insert([record]), { any: true, code: 'SQLITE_READONLY' }, 'Knex alone cannot write here');
  const store = new KnexUsageStore(readOnly, { preparedWrites: writer });
  await store.insert([record]);
  t.deepEqual(await store.list(), [record]);
});
