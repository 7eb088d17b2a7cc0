import test from 'ava';
import knexFactory from 'knex';
import { cachedKeyStore } from '../../lib/auth/cached-key-store.js';
import { KnexAdminSessionStore } from '../../lib/stores/knex/admin-session-store.js';
import { KnexAdminTokenStore } from '../../lib/stores/knex/admin-token-store.js';
import { KnexAuditStore } from '../../lib/stores/knex/audit-store.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { sqliteReader, sqliteWriter, SqliteWriterGoneError } from '../../lib/stores/knex/sqlite-writer.js';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import { MemoryAdminSessionStore } from '../../lib/stores/memory/admin-session-store.js';
import { MemoryAdminTokenStore } from '../../lib/stores/memory/admin-token-store.js';
import { MemoryAuditStore } from '../../lib/stores/memory/audit-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { adminSessionStoreContract } from '../../lib/testing/admin-session-store-contract.js';
import { adminTokenStoreContract } from '../../lib/testing/admin-token-store-contract.js';
import { auditStoreContract } from '../../lib/testing/audit-store-contract.js';
import { keyRotationContract, keyStoreContract } from '../../lib/testing/key-store-contract.js';
import { usageRecord, usageStoreContract } from '../../lib/testing/usage-store-contract.js';
import { CONTRACT_STORE_OPTIONS, contractStores, partialBatchStoresNothing, rotationAcrossProcesses } from '../helpers/contract-stores.js';
import { sqliteDatabase } from '../helpers/services.js';

// The contracts of the stores of keys, usage, the audit log and admin tokens and sessions, on memory
// and SQLite; on PostgreSQL they run in store-contracts-postgres (contract-stores says why). The
// file store has files of its own, and so have the key changes: their Redis clients must be ready
// within 5 s, which this file's hundreds of tests starting at once on one thread may not leave them.

// A writer that failed would leave its store on Knex: the contract would not have tested it.
const writerFailures: Error[] = [];
const stores = contractStores(test, {
  afterClosing() {
    if (writerFailures.length > 0) throw new Error('a SQLite writer thread failed', { cause: writerFailures[0] });
  },
});

// Admin tokens and sessions, audit log.

adminTokenStoreContract(test, 'memory', async () => new MemoryAdminTokenStore());
adminTokenStoreContract(test, 'sqlite', async () => new KnexAdminTokenStore(await stores.migrated(sqliteDatabase), CONTRACT_STORE_OPTIONS));

adminSessionStoreContract(test, 'memory', async () => new MemoryAdminSessionStore());
adminSessionStoreContract(test, 'sqlite', async () => new KnexAdminSessionStore(await stores.migrated(sqliteDatabase), CONTRACT_STORE_OPTIONS));

auditStoreContract(test, 'memory', async () => new MemoryAuditStore());
auditStoreContract(test, 'sqlite', async () => new KnexAuditStore(await stores.migrated(sqliteDatabase), CONTRACT_STORE_OPTIONS));

// Keys.

keyStoreContract(test, 'memory', async () => new MemoryKeyStore());
keyStoreContract(test, 'sqlite', () => stores.keyStore(sqliteDatabase));
keyStoreContract(test, 'sqlite, prepared reads', () => stores.keyStore(sqliteDatabase, { prepared: true }));
keyStoreContract(test, 'memory behind cachedKeyStore', async () => cachedKeyStore(new MemoryKeyStore()));
keyStoreContract(test, 'sqlite behind cachedKeyStore', async () => cachedKeyStore(await stores.keyStore(sqliteDatabase)));

keyRotationContract(test, 'memory', async () => {
  const store = new MemoryKeyStore();
  return [store, store];
});
keyRotationContract(test, 'sqlite', () => stores.keyViews(sqliteDatabase));
keyRotationContract(test, 'sqlite behind cachedKeyStore', async () => {
  const [one, two] = await stores.keyViews(sqliteDatabase);
  return [cachedKeyStore(one), cachedKeyStore(two)];
});
rotationAcrossProcesses(test, 'sqlite', stores, sqliteDatabase);

test('the Knex stores refuse a timeoutMs that is not a positive integer of milliseconds, when they are made', async (t) => {
  const { knex, destroy } = await sqliteDatabase();
  stores.closeAfter(destroy);
  for (const timeoutMs of [0, -1, 1.5, Number.NaN]) {
    t.throws(() => new KnexKeyStore(knex, { timeoutMs }), { instanceOf: TypeError, message: /timeoutMs/ });
    t.throws(() => new KnexFileStore(knex, { timeoutMs }), { instanceOf: TypeError, message: /timeoutMs/ });
  }
});

// Usage.

/** A migrated SQLite database, and its file for a writer thread's connection. */
async function migratedSqlite() {
  const db = await stores.migratedDatabase(sqliteDatabase);
  return { db, filename: (db.config.connection as { filename: string }).filename };
}

/** A writer thread on `filename`, closed after the tests; its failure fails them. */
function writerOn(filename: string) {
  const writer = sqliteWriter(filename, { onFailure: (err) => writerFailures.push(err) });
  stores.closeAfter(() => writer.close());
  return writer;
}

/** A reader thread on `filename`, closed after the tests; its failure fails them. */
function readerOn(filename: string) {
  const reader = sqliteReader(filename, { onFailure: (err) => writerFailures.push(err) });
  stores.closeAfter(() => reader.close());
  return reader;
}

/** SQLite with the inserts run by a `sqliteWriter` and the summaries by a `sqliteReader`, each on its worker thread's connection; the lists Knex's. */
async function sqliteWriterStore(): Promise<KnexUsageStore> {
  const { db, filename } = await migratedSqlite();
  return new KnexUsageStore(db.knex, { ...CONTRACT_STORE_OPTIONS, preparedWrites: writerOn(filename), reportReads: readerOn(filename) });
}

usageStoreContract(test, 'memory', async () => new MemoryUsageStore());
usageStoreContract(test, 'sqlite', () => stores.usageStore(sqliteDatabase));
usageStoreContract(test, 'sqlite with writer and reader threads', sqliteWriterStore);

test('sqlite with a reader thread: a summary makes no query on Knex\'s connection, which the requests use; once the reader is gone, it does', async (t) => {
  const { db, filename } = await migratedSqlite();
  const reader = readerOn(filename);
  const store = new KnexUsageStore(db.knex, { reportReads: reader });
  await store.insert([usageRecord({ time: Date.parse('2030-01-15T12:30:00.000Z') })]);
  const onKnex: string[] = [];
  db.knex.on('query', ({ sql }: { sql: string }) => onKnex.push(sql));
  const summary = { requests: 1, answered: 1, inputTokens: 10, outputTokens: 5, costPicoUsd: 0n };
  // A since within an hour reads the records, the hourly and the daily roll-ups: three queries.
  t.deepEqual(await store.summarize({ since: Date.parse('2030-01-15T12:00:00.001Z') }, 'day'), [{ group: '2030-01-15', ...summary }]);
  t.deepEqual(onKnex, []);
  await reader.close();
  t.deepEqual(await store.summarize({}, 'model'), [{ group: 'echo-1', ...summary }]);
  t.is(onKnex.length, 1);
});

partialBatchStoresNothing(test, 'sqlite', () => stores.usageStore(sqliteDatabase));
partialBatchStoresNothing(test, 'sqlite with a writer thread', sqliteWriterStore);

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
