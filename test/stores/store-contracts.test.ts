import { fileURLToPath } from 'node:url';
import test from 'ava';
import knexFactory from 'knex';
import { cachedKeyStore } from '../../lib/auth/cached-key-store.js';
import { hashApiKey } from '../../lib/auth/keys.js';
import { KnexAdminSessionStore } from '../../lib/stores/knex/admin-session-store.js';
import { KnexAdminTokenStore } from '../../lib/stores/knex/admin-token-store.js';
import { KnexAuditStore } from '../../lib/stores/knex/audit-store.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { sqliteWriter, SqliteWriterGoneError } from '../../lib/stores/knex/sqlite-writer.js';
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
import { preparedReadsOn, type TestPreparedReads } from '../helpers/prepared-reads.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';
import { runTogether } from '../helpers/worker-processes.js';

// The contracts of the stores of keys, usage, the audit log and admin tokens and sessions, on memory
// and on every database that holds them. The file store has a file of its own, and so have the key
// changes: their Redis clients must be ready within 5 s, which this file's hundreds of tests
// starting at once on one thread may not leave them.

const databases: TestDatabase[] = [];
const readers: TestPreparedReads[] = [];
const writers: Array<{ close(): Promise<void> }> = [];
// A writer that failed would leave its store on Knex: the contract would not have tested it.
const writerFailures: Error[] = [];
test.after.always(async () => {
  await Promise.all([...readers, ...writers].map((each) => each.close()));
  await Promise.all(databases.map((db) => db.destroy()));
  if (writerFailures.length > 0) throw new Error('a SQLite writer thread failed', { cause: writerFailures[0] });
});

/** A database `open` makes, migrated, destroyed after the tests. */
async function migratedDatabase(open: () => Promise<TestDatabase>): Promise<TestDatabase> {
  const db = await open();
  databases.push(db);
  await migrate(db.knex);
  return db;
}

const migrated = async (open: () => Promise<TestDatabase>) => (await migratedDatabase(open)).knex;

// Admin tokens and sessions, audit log.

adminTokenStoreContract(test, 'memory', async () => new MemoryAdminTokenStore());
adminTokenStoreContract(test, 'sqlite', async () => new KnexAdminTokenStore(await migrated(sqliteDatabase)));
adminTokenStoreContract(withPostgres(test), 'postgres', async () => new KnexAdminTokenStore(await migrated(postgresDatabase)));

adminSessionStoreContract(test, 'memory', async () => new MemoryAdminSessionStore());
adminSessionStoreContract(test, 'sqlite', async () => new KnexAdminSessionStore(await migrated(sqliteDatabase)));
adminSessionStoreContract(withPostgres(test), 'postgres', async () => new KnexAdminSessionStore(await migrated(postgresDatabase)));

auditStoreContract(test, 'memory', async () => new MemoryAuditStore());
auditStoreContract(test, 'sqlite', async () => new KnexAuditStore(await migrated(sqliteDatabase)));
auditStoreContract(withPostgres(test), 'postgres', async () => new KnexAuditStore(await migrated(postgresDatabase)));

// Keys.

async function knexKeyStore(open: () => Promise<TestDatabase>, { prepared = false } = {}) {
  const db = await migratedDatabase(open);
  const reader = prepared ? preparedReadsOn(db) : undefined;
  if (reader) readers.push(reader);
  return new KnexKeyStore(db.knex, reader ? { preparedReads: reader.reads } : {});
}

keyStoreContract(test, 'memory', async () => new MemoryKeyStore());
keyStoreContract(test, 'sqlite', () => knexKeyStore(sqliteDatabase));
keyStoreContract(test, 'sqlite, prepared reads', () => knexKeyStore(sqliteDatabase, { prepared: true }));
keyStoreContract(withPostgres(test), 'postgres', () => knexKeyStore(postgresDatabase));
keyStoreContract(withPostgres(test), 'postgres, prepared reads', () => knexKeyStore(postgresDatabase, { prepared: true }));
keyStoreContract(test, 'memory behind cachedKeyStore', async () => cachedKeyStore(new MemoryKeyStore()));
keyStoreContract(test, 'sqlite behind cachedKeyStore', async () => cachedKeyStore(await knexKeyStore(sqliteDatabase)));

/**
 * Two views of one database, as two server processes have: two pools on PostgreSQL; on SQLite one
 * pool, whose driver waits for another connection's lock synchronously, in this same process
 * (across processes: the test below).
 */
async function knexViews(open: () => Promise<TestDatabase>): Promise<[KnexKeyStore, KnexKeyStore]> {
  const db = await migratedDatabase(open);
  if (db.config.client !== 'pg') return [new KnexKeyStore(db.knex), new KnexKeyStore(db.knex)];
  const other = knexFactory(db.config);
  databases.push({ ...db, destroy: () => other.destroy() });
  return [new KnexKeyStore(db.knex), new KnexKeyStore(other)];
}

keyRotationContract(test, 'memory', async () => {
  const store = new MemoryKeyStore();
  return [store, store];
});
keyRotationContract(test, 'sqlite', () => knexViews(sqliteDatabase));
keyRotationContract(withPostgres(test), 'postgres', () => knexViews(postgresDatabase));
keyRotationContract(test, 'sqlite behind cachedKeyStore', async () => {
  const [one, two] = await knexViews(sqliteDatabase);
  return [cachedKeyStore(one), cachedKeyStore(two)];
});

const ROTATION_WORKER = fileURLToPath(new URL('../helpers/key-rotation-worker.js', import.meta.url));

for (const [name, open, gated] of [
  ['sqlite', sqliteDatabase, test],
  ['postgres', postgresDatabase, withPostgres(test)],
] as const) {
  gated(`${name}: ten rotations of one key at once, across two processes, make exactly one new key`, async (t) => {
    const db = await migratedDatabase(open);
    const store = new KnexKeyStore(db.knex);
    const old = await store.create({ account: 'parallel', hash: hashApiKey('kmg_sk_parallel'), scopes: ['models:read'], models: null, expiresAt: null });
    const job = { config: db.config, id: old.id, count: 5, nowSeconds: Date.now() / 1000 };
    const outputs = await runTogether(ROTATION_WORKER, [[JSON.stringify(job)], [JSON.stringify(job)]]);
    const outcomes = outputs.flatMap((line) => JSON.parse(line) as string[]).sort();
    t.deepEqual(outcomes, ['replaced', 'replaced', 'replaced', 'replaced', 'replaced', 'replaced', 'replaced', 'replaced', 'replaced', 'rotated']);
    t.is((await store.list({ account: 'parallel' })).length, 2);
  });
}

test('the Knex stores refuse a timeoutMs that is not a positive integer of milliseconds, when they are made', async (t) => {
  const db = await sqliteDatabase();
  databases.push(db);
  for (const timeoutMs of [0, -1, 1.5, Number.NaN]) {
    t.throws(() => new KnexKeyStore(db.knex, { timeoutMs }), { instanceOf: TypeError, message: /timeoutMs/ });
    t.throws(() => new KnexFileStore(db.knex, { timeoutMs }), { instanceOf: TypeError, message: /timeoutMs/ });
  }
});

// Usage.

const knexUsageStore = async (open: () => Promise<TestDatabase>) => new KnexUsageStore(await migrated(open));

/** A migrated SQLite database, and its file for a writer thread's connection. */
async function migratedSqlite(): Promise<{ db: TestDatabase; filename: string }> {
  const db = await migratedDatabase(sqliteDatabase);
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
usageStoreContract(test, 'sqlite', () => knexUsageStore(sqliteDatabase));
usageStoreContract(test, 'sqlite with a writer thread', sqliteWriterStore);
usageStoreContract(withPostgres(test), 'postgres', () => knexUsageStore(postgresDatabase));

// The recorder tries a failed batch again: a batch stored in part would then be counted twice.
for (const [name, gate, open] of [
  ['sqlite', test, () => knexUsageStore(sqliteDatabase)],
  ['sqlite with a writer thread', test, sqliteWriterStore],
  ['postgres', withPostgres(test), () => knexUsageStore(postgresDatabase)],
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
