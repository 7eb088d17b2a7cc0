import { fileURLToPath } from 'node:url';
import test from 'ava';
import knexFactory, { type Knex } from 'knex';
import { cachedKeyStore } from '../../lib/auth/cached-key-store.js';
import type { FileRecord, StockLimits } from '../../lib/files/file-store.js';
import { newFileId } from '../../lib/files/file-id.js';
import { KnexAccountBudgetStore } from '../../lib/stores/knex/account-budget-store.js';
import { KnexAdminSessionStore } from '../../lib/stores/knex/admin-session-store.js';
import { KnexAdminUserStore } from '../../lib/stores/knex/admin-user-store.js';
import { KnexAdminTokenStore } from '../../lib/stores/knex/admin-token-store.js';
import { KnexAuditStore } from '../../lib/stores/knex/audit-store.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { KnexKeyChanges } from '../../lib/stores/knex/key-changes.js';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { sqliteReader, sqliteWriter, SqliteWriterGoneError } from '../../lib/stores/knex/sqlite-writer.js';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import { accountBudgetStoreContract } from '../../lib/testing/account-budget-store-contract.js';
import { adminSessionStoreContract } from '../../lib/testing/admin-session-store-contract.js';
import { adminUserStoreContract } from '../../lib/testing/admin-user-store-contract.js';
import { adminTokenStoreContract } from '../../lib/testing/admin-token-store-contract.js';
import { auditStoreContract } from '../../lib/testing/audit-store-contract.js';
import { fileStoreContract } from '../../lib/testing/file-store-contract.js';
import { keyChangesContract } from '../../lib/testing/key-changes-contract.js';
import { keyRotationContract, keyStoreContract } from '../../lib/testing/key-store-contract.js';
import { usageRecord, usageStoreContract } from '../../lib/testing/usage-store-contract.js';
import { CONTRACT_STORE_OPTIONS, contractStores, partialBatchStoresNothing, rotationAcrossProcesses } from '../helpers/contract-stores.js';
import { sqliteDatabase } from '../helpers/services.js';
import { runTogether } from '../helpers/worker-processes.js';

// Every store family's contract on the Knex stores on SQLite (lib/stores/knex), and what SQLite
// alone has: processes writing one file, the usage writer thread. On PostgreSQL they run in
// knex-postgres-stores (contract-stores says why).

// A writer that failed would leave its store on Knex: the contract would not have tested it.
const writerFailures: Error[] = [];
const stores = contractStores(test, {
  afterClosing() {
    if (writerFailures.length > 0) throw new Error('a SQLite writer thread failed', { cause: writerFailures[0] });
  },
});

// Admin tokens and sessions, audit log.

adminTokenStoreContract(test, 'sqlite KnexAdminTokenStore', async () => new KnexAdminTokenStore(await stores.migrated(sqliteDatabase), CONTRACT_STORE_OPTIONS));

adminSessionStoreContract(
  test,
  'sqlite KnexAdminSessionStore',
  async () => new KnexAdminSessionStore(await stores.migrated(sqliteDatabase), CONTRACT_STORE_OPTIONS),
);
adminUserStoreContract(test, 'sqlite KnexAdminUserStore', async () => new KnexAdminUserStore(await stores.migrated(sqliteDatabase), CONTRACT_STORE_OPTIONS));

auditStoreContract(test, 'sqlite KnexAuditStore', async () => new KnexAuditStore(await stores.migrated(sqliteDatabase), CONTRACT_STORE_OPTIONS));

// Keys.

keyStoreContract(test, 'sqlite KnexKeyStore', () => stores.keyStore(sqliteDatabase));
keyStoreContract(test, 'sqlite KnexKeyStore, prepared reads', () => stores.keyStore(sqliteDatabase, { prepared: true }));
keyStoreContract(test, 'sqlite KnexKeyStore behind cachedKeyStore', async () => cachedKeyStore(await stores.keyStore(sqliteDatabase)));

keyRotationContract(test, 'sqlite KnexKeyStore', () => stores.keyViews(sqliteDatabase));
keyRotationContract(test, 'sqlite KnexKeyStore behind cachedKeyStore', async () => {
  const [one, two] = await stores.keyViews(sqliteDatabase);
  return [cachedKeyStore(one), cachedKeyStore(two)];
});
rotationAcrossProcesses(test, 'sqlite KnexKeyStore', stores, sqliteDatabase);

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

usageStoreContract(test, 'sqlite KnexUsageStore', () => stores.usageStore(sqliteDatabase));
usageStoreContract(test, 'sqlite KnexUsageStore with writer and reader threads', sqliteWriterStore);

test("sqlite with a reader thread: a summary makes no query on Knex's connection, which the requests use; once the reader is gone, it does", async (t) => {
  const { db, filename } = await migratedSqlite();
  const reader = readerOn(filename);
  const store = new KnexUsageStore(db.knex, { ...CONTRACT_STORE_OPTIONS, reportReads: reader });
  await store.insert([usageRecord({ time: Date.parse('2030-01-15T12:30:00.000Z') })]);
  const onKnex: string[] = [];
  db.knex.on('query', ({ sql }: { sql: string }) => onKnex.push(sql));
  const summary = { requests: 1, answered: 1, inputTokens: 10, outputTokens: 5, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n };
  // A since within an hour reads the records, the hourly and the daily roll-ups: three queries.
  t.deepEqual(await store.summarize({ since: Date.parse('2030-01-15T12:00:00.001Z') }, 'day'), [{ group: '2030-01-15', ...summary }]);
  t.deepEqual(onKnex, []);
  await reader.close();
  t.deepEqual(await store.summarize({}, 'model'), [{ group: 'echo-1', ...summary }]);
  t.is(onKnex.length, 1);
});

partialBatchStoresNothing(test, 'sqlite KnexUsageStore', () => stores.usageStore(sqliteDatabase));
partialBatchStoresNothing(test, 'sqlite KnexUsageStore with a writer thread', sqliteWriterStore);

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

// Files.

const seed = { seed: stores.seedFiles };
fileStoreContract(test, 'sqlite KnexFileStore', () => stores.fileStore(sqliteDatabase), seed);
fileStoreContract(test, 'sqlite KnexFileStore, prepared reads', () => stores.fileStore(sqliteDatabase, { prepared: true }), seed);

const WORKER = fileURLToPath(new URL('../helpers/file-store-worker.js', import.meta.url));

/** Runs `create` for each batch in a process of its own, all released at the same moment. */
async function createInProcesses(config: Knex.Config, batches: FileRecord[][], limits: StockLimits, now: number) {
  const outputs = await runTogether(
    WORKER,
    batches.map((files) => [JSON.stringify({ config, files, limits, now })]),
  );
  return outputs.flatMap((output) => JSON.parse(output) as (boolean | string)[]);
}

const NOW = 1_800_000_000;
const file = (account: string, bytes: number): FileRecord => ({
  id: newFileId(NOW),
  account,
  filename: 'report.pdf',
  bytes,
  createdAt: NOW,
  expiresAt: null,
});

test('sqlite: four processes creating at once create exactly maxFiles, without a busy error', async (t) => {
  const db = await stores.migratedDatabase(sqliteDatabase);
  const batches = Array.from({ length: 4 }, () => Array.from({ length: 25 }, () => file('acme', 10)));
  const results = await createInProcesses(db.config, batches, { maxFiles: 30, maxBytes: 1_000_000 }, NOW);
  t.deepEqual(
    results.filter((result) => typeof result === 'string'),
    [],
  );
  t.is(results.filter((result) => result === true).length, 30);
  t.deepEqual(await new KnexFileStore(db.knex).usage('acme', NOW), { files: 30, bytes: 300 });
});

test('sqlite: four processes creating at once never push an account over maxBytes', async (t) => {
  const db = await stores.migratedDatabase(sqliteDatabase);
  const limits = { maxFiles: 1000, maxBytes: 5000 };
  const batches = Array.from({ length: 4 }, (_, b) => Array.from({ length: 25 }, (_, i) => file('acme', 1 + (((b * 25 + i) * 37) % 200))));
  const results = await createInProcesses(db.config, batches, limits, NOW);
  t.deepEqual(
    results.filter((result) => typeof result === 'string'),
    [],
  );
  const sizes = batches.flat().map((created) => created.bytes);
  const createdBytes = sizes.filter((_, i) => results[i] === true).reduce((sum, bytes) => sum + bytes, 0);
  const usage = await new KnexFileStore(db.knex).usage('acme', NOW);
  t.is(usage.bytes, createdBytes);
  t.true(usage.bytes <= limits.maxBytes, `${usage.bytes} bytes kept`);
  for (const [i, bytes] of sizes.entries()) {
    if (results[i] === false) t.true(usage.bytes + bytes > limits.maxBytes, `a file of ${bytes} bytes was refused needlessly`);
  }
});

// Key changes and account budgets.

keyChangesContract(test, 'sqlite KnexKeyChanges', () => stores.keyChangesPair(sqliteDatabase));
accountBudgetStoreContract(test, 'sqlite KnexAccountBudgetStore', async () => new KnexAccountBudgetStore(await stores.migrated(sqliteDatabase)));

test('KnexKeyChanges refuses an interval that is not a positive number', (t) => {
  t.throws(() => new KnexKeyChanges({} as never, { intervalMs: 0 }), { message: /intervalMs/ });
});
