import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import knexFactory from 'knex';
import { createApiKey } from '../../../lib/auth/keys.js';
import { newFileId } from '../../../lib/files/file-id.js';
import { KnexAccountBudgetStore } from '../../../lib/stores/knex/account-budget-store.js';
import { KnexFileStore } from '../../../lib/stores/knex/file-store.js';
import { KnexKeyStore } from '../../../lib/stores/knex/key-store.js';
import { sqliteReader, sqliteWriter, SqliteWriterGoneError } from '../../../lib/stores/knex/sqlite-writer.js';
import { KnexUsageStore } from '../../../lib/stores/knex/usage-store.js';
import { accountBudgetStoreContract } from '../../../lib/testing/account-budget-store-contract.js';
import { usageRecord, usageStoreContract } from '../../../lib/testing/usage-store-contract.js';
import { CONTRACT_STORE_OPTIONS, contractStores, partialBatchStoresNothing } from '../../helpers/contract-stores.js';
import { sqliteDatabase } from '../../helpers/services.js';

const run = promisify(execFile);
/** The compiled module of the writer and reader threads, for the tests that load it in a process of their own. */
const WRITER_MODULE = new URL('../../../lib/stores/knex/sqlite-writer.js', import.meta.url).href;

// The contracts of the usage store and the account budgets on the Knex stores on SQLite, and what
// SQLite alone has: the usage writer and reader threads. The other families in the files beside
// this one.

// A writer that failed would leave its store on Knex: the contract would not have tested it.
const writerFailures: Error[] = [];
const stores = contractStores(test, {
  afterClosing() {
    if (writerFailures.length > 0) throw new Error('a SQLite writer thread failed', { cause: writerFailures[0] });
  },
});

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

test("sqlite with a reader thread: the key list and an account's files read there too, the same as on Knex's connection", async (t) => {
  const { db, filename } = await migratedSqlite();
  const onReader = { ...CONTRACT_STORE_OPTIONS, reportReads: readerOn(filename) };
  const [keys, files] = [new KnexKeyStore(db.knex, onReader), new KnexFileStore(db.knex, onReader)];
  const [keysOnKnex, filesOnKnex] = [new KnexKeyStore(db.knex, CONTRACT_STORE_OPTIONS), new KnexFileStore(db.knex, CONTRACT_STORE_OPTIONS)];
  for (const account of ['acme', 'globex']) await createApiKey(keys, { prefix: 'kmg', account, scopes: ['models:read'], models: ['echo-1'] });
  const now = 1_900_000_000;
  for (const [bytes, expiresAt] of [
    [10, null],
    [20, now + 60],
    [40, now - 60],
  ] as const) {
    const file = { id: newFileId(now), account: 'acme', filename: 'a.pdf', bytes, createdAt: now - 120, expiresAt };
    t.true(await files.create(file, { maxFiles: 10, maxBytes: 1000 }, now - 120));
  }
  const onKnex: string[] = [];
  db.knex.on('query', ({ sql }: { sql: string }) => onKnex.push(sql));
  const listed = await keys.list();
  const kept = await files.usage('acme', now);
  t.deepEqual(onKnex, []);
  t.is(listed.length, 2);
  t.deepEqual(listed, await keysOnKnex.list());
  t.deepEqual(kept, { files: 2, bytes: 30 });
  t.deepEqual(kept, await filesOnKnex.usage('acme', now));
  t.deepEqual(await files.usage('globex', now), { files: 0, bytes: 0 });
});

/**
 * A process of its own that opens a reader on `filename` and reads once, then prints the nice
 * value of each of its threads, before and after the reader's: in the test's process the other
 * test files' servers run readers of their own.
 */
const PRIORITIES = `
const { readdirSync, readFileSync } = require('node:fs');
// The nice value is the 19th field of a thread's stat line, the 17th after the command's parenthesis.
const priorities = () => Object.fromEntries(readdirSync('/proc/self/task').map((tid) => {
  const stat = readFileSync('/proc/self/task/' + tid + '/stat', 'utf8');
  return [tid, Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])];
}));
import(process.argv[1]).then(async ({ sqliteReader }) => {
  const before = priorities();
  const reader = sqliteReader(process.argv[2], { onFailure: (err) => { throw err; } });
  await reader.all('select 1', []);
  process.stdout.write(JSON.stringify({ pid: process.pid, before, after: priorities() }));
  await reader.close();
});
`;

test('sqlite: the reader thread runs at the lowest priority, a report waiting for model calls rather than they for it', async (t) => {
  if (process.platform !== 'linux') return t.pass('a thread of its own priority: Linux');
  const { filename } = await migratedSqlite();
  const { stdout } = await run(process.execPath, ['-e', PRIORITIES, WRITER_MODULE, filename]);
  const { pid, before, after } = JSON.parse(stdout) as { pid: number } & Record<'before' | 'after', Record<string, number>>;
  const added = Object.entries(after).filter(([tid]) => !(tid in before));
  t.deepEqual(added.filter(([, nice]) => nice === 19).length, 1, JSON.stringify(added));
  const own = before[String(pid)];
  t.deepEqual(
    Object.values(before).filter((nice) => nice !== own),
    [],
    "the other threads keep the process's priority",
  );
});

// A process started with --input-type=module runs a worker's text as a module, without require.
const WRITE_AND_READ = `
const { sqliteReader, sqliteWriter } = await import(process.argv[1]);
const onFailure = (err) => { throw err; };
const [writer, reader] = [sqliteWriter(process.argv[2], { onFailure }), sqliteReader(process.argv[2], { onFailure })];
await writer.prepare('create table kept (word text)')([]);
await writer.prepare('insert into kept values (?)')(['written']);
process.stdout.write(JSON.stringify(await reader.all('select word from kept', [])));
`;

test('sqlite: the writer and reader threads work in a process started with --input-type=module', async (t) => {
  const { filename } = await migratedSqlite();
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', WRITE_AND_READ, WRITER_MODULE, filename]);
  t.deepEqual(JSON.parse(stdout), [{ word: 'written' }]);
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

accountBudgetStoreContract(test, 'sqlite KnexAccountBudgetStore', async () => new KnexAccountBudgetStore(await stores.migrated(sqliteDatabase)));
