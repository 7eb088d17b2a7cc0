import { fileURLToPath } from 'node:url';
import test from 'ava';
import type { Knex } from 'knex';
import type { FileRecord, FileStore, StockLimits } from '../../lib/files/file-store.js';
import { newFileId } from '../../lib/files/file-id.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { fileStoreContract } from '../../lib/testing/file-store-contract.js';
import { preparedReadsOn, type TestPreparedReads } from '../helpers/prepared-reads.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';
import { runTogether } from '../helpers/worker-processes.js';

const databases: TestDatabase[] = [];
const readers: TestPreparedReads[] = [];
test.after.always(async () => {
  await Promise.all(readers.map((reader) => reader.close()));
  await Promise.all(databases.map((db) => db.destroy()));
});

async function openDatabase(open: () => Promise<TestDatabase>): Promise<TestDatabase> {
  const db = await open();
  databases.push(db);
  await migrate(db.knex);
  return db;
}

const knexOf = new WeakMap<FileStore, Knex>();

async function knexStore(open: () => Promise<TestDatabase>, { prepared = false } = {}): Promise<FileStore> {
  const db = await openDatabase(open);
  const { knex } = db;
  const reader = prepared ? preparedReadsOn(db) : undefined;
  if (reader) readers.push(reader);
  // The contract is about what a store keeps, exactly, however the calls interleave: 50 creations
  // queued on a pool of four may take longer than the default bound on a busy machine, and the
  // bound has tests of its own (knex-plumbing, postgres-faults).
  const timeoutMs = 60_000;
  const store = new KnexFileStore(knex, reader ? { preparedReads: reader.reads, timeoutMs } : { timeoutMs });
  knexOf.set(store, knex);
  return store;
}

// Ten thousand creations one by one would take a minute on a database: insert the rows directly.
async function seedRows(store: FileStore, files: FileRecord[]): Promise<void> {
  const knex = knexOf.get(store);
  if (!knex) throw new Error('not a store of this file');
  const rows = files.map((file) => ({
    id: file.id,
    account: file.account,
    filename: file.filename,
    bytes: file.bytes,
    created_at: file.createdAt,
    expires_at: file.expiresAt,
  }));
  await knex.batchInsert('kmg_files', rows, 500);
}

fileStoreContract(test, 'memory', async () => new MemoryFileStore());
fileStoreContract(test, 'sqlite', () => knexStore(sqliteDatabase), { seed: seedRows });
fileStoreContract(withPostgres(test), 'postgres', () => knexStore(postgresDatabase), { seed: seedRows });
fileStoreContract(test, 'sqlite, prepared reads', () => knexStore(sqliteDatabase, { prepared: true }), { seed: seedRows });
fileStoreContract(withPostgres(test), 'postgres, prepared reads', () => knexStore(postgresDatabase, { prepared: true }), { seed: seedRows });

withPostgres(test)('postgres: file ids are stored in the "C" collation, so index order is byte order', async (t) => {
  const { knex } = await openDatabase(postgresDatabase);
  const result = await knex.raw<{ rows: { collation_name: string }[] }>(
    `select collation_name from information_schema.columns
     where table_schema = current_schema() and table_name = 'kmg_files' and column_name = 'id'`,
  );
  t.deepEqual(result.rows, [{ collation_name: 'C' }]);
});

const WORKER = fileURLToPath(new URL('../helpers/file-store-worker.js', import.meta.url));

/** Runs `create` for each batch in a process of its own, all released at the same moment. */
async function createInProcesses(config: Knex.Config, batches: FileRecord[][], limits: StockLimits, now: number) {
  const outputs = await runTogether(WORKER, batches.map((files) => [JSON.stringify({ config, files, limits, now })]));
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
  const db = await openDatabase(sqliteDatabase);
  const batches = Array.from({ length: 4 }, () => Array.from({ length: 25 }, () => file('acme', 10)));
  const results = await createInProcesses(db.config, batches, { maxFiles: 30, maxBytes: 1_000_000 }, NOW);
  t.deepEqual(results.filter((result) => typeof result === 'string'), []);
  t.is(results.filter((result) => result === true).length, 30);
  t.deepEqual(await new KnexFileStore(db.knex).usage('acme', NOW), { files: 30, bytes: 300 });
});

test('sqlite: four processes creating at once never push an account over maxBytes', async (t) => {
  const db = await openDatabase(sqliteDatabase);
  const limits = { maxFiles: 1000, maxBytes: 5000 };
  const batches = Array.from({ length: 4 }, (_, b) => Array.from({ length: 25 }, (_, i) => file('acme', 1 + ((b * 25 + i) * 37) % 200)));
  const results = await createInProcesses(db.config, batches, limits, NOW);
  t.deepEqual(results.filter((result) => typeof result === 'string'), []);
  const sizes = batches.flat().map((created) => created.bytes);
  const createdBytes = sizes.filter((_, i) => results[i] === true).reduce((sum, bytes) => sum + bytes, 0);
  const usage = await new KnexFileStore(db.knex).usage('acme', NOW);
  t.is(usage.bytes, createdBytes);
  t.true(usage.bytes <= limits.maxBytes, `${usage.bytes} bytes kept`);
  for (const [i, bytes] of sizes.entries()) {
    if (results[i] === false) t.true(usage.bytes + bytes > limits.maxBytes, `a file of ${bytes} bytes was refused needlessly`);
  }
});
