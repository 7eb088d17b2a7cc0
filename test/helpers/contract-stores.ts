import { AsyncLocalStorage } from 'node:async_hooks';
import { fileURLToPath } from 'node:url';
import type { ExecutionContext, TestFn } from 'ava';
import knexFactory, { type Knex } from 'knex';
import { hashApiKey } from '../../lib/auth/keys.js';
import type { FileRecord, FileStore } from '../../lib/files/file-store.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { KnexKeyChanges } from '../../lib/stores/knex/key-changes.js';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';
import { copyMigratedSqlite, emptySchema } from './migrated-databases.js';
import { preparedReadsOn } from './prepared-reads.js';
import type { TestDatabase } from './services.js';
import { runTogether } from './worker-processes.js';

// The Knex stores' contracts run in files of their own per database (test/stores/knex-sqlite/,
// test/stores/knex-postgres/), one per store family, so that AVA spreads them over its workers:
// SQLite's driver runs on the test's own thread, and a contract's largest tests keep it busy for
// seconds at a time: PostgreSQL connections opened on that thread meanwhile could not finish their
// handshake in a busy suite. This module holds what the files share.

/** Opens a database; `prepare` may make a SQLite file before it is opened. */
type Open = (options: { prepare?: (filename: string) => Promise<void> }) => Promise<TestDatabase>;

/**
 * The contracts are about what a store keeps, however the calls interleave, on a machine as busy
 * as the suite makes it: a contract file starts all its tests at once, each on a database of its
 * own, and with dozens of schemas migrating together on two cores, store calls waited past the
 * default 5 s (two tests of one run). So a bound no such machine reaches; the bound has tests of
 * its own (knex-plumbing, postgres-faults).
 */
export const CONTRACT_STORE_OPTIONS = { timeoutMs: 60_000 };

/**
 * How many tests of a PostgreSQL contract file run at once (`fewAtOnce`). A test holds its schema's
 * pool (at most 4 connections), a few also a prepared reader (1) or a second pool (4, or two
 * processes' 8): three at once peaked at 10 connections alone, the file's share of a stock server
 * (docs/TESTING.md), in about two thirds of the time that two at once take.
 */
export const POSTGRES_CONTRACT_TESTS_AT_ONCE = 3;

/** What a test opened, or the file outside its tests: closed in this order. */
interface Opened {
  closers: Array<() => Promise<void>>;
  databases: TestDatabase[];
}

/**
 * Migrated PostgreSQL schemas that tests have ended with, emptied for the next test of the file:
 * a new schema and its migration cost the server about a fifth of a CPU-second, a contract file a
 * hundred of them; emptying one costs a few milliseconds. A schema that cannot be emptied is dropped.
 */
type SpareSchemas = Map<Open, TestDatabase[]>;

async function emptied(db: TestDatabase): Promise<boolean> {
  try {
    const [schema] = db.config.searchPath as string[];
    await db.knex.transaction((trx) => emptySchema(trx, schema!));
    return true;
  } catch {
    return false;
  }
}

async function closeAll({ closers, databases }: Opened, spares?: SpareSchemas, openOf?: WeakMap<TestDatabase, Open>): Promise<void> {
  await Promise.all(closers.map((close) => close()));
  await Promise.all(
    databases.map(async (db) => {
      const open = openOf?.get(db);
      if (spares && open && (await emptied(db))) spares.get(open)?.push(db) ?? spares.set(open, [db]);
      else await db.destroy();
    }),
  );
}

/**
 * The Knex stores of a contract file, each on a migrated database of its own (on PostgreSQL, a
 * schema an earlier test of the file ended with, emptied), closed when the test
 * that opened them ends (with `eachTestCloses`) or else after the file's tests; then
 * `afterClosing` runs, to check what closing them found.
 */
export function contractStores(test: TestFn, { afterClosing = () => {} } = {}) {
  const ofFile: Opened = { closers: [], databases: [] };
  const ofTest = new AsyncLocalStorage<Opened>();
  const opened = () => ofTest.getStore() ?? ofFile;
  const spares: SpareSchemas = new Map();
  /** The `open` of each PostgreSQL schema a test may hand on to the next. */
  const openOf = new WeakMap<TestDatabase, Open>();
  test.after.always(async () => {
    await closeAll(ofFile);
    await Promise.all([...spares.values()].flat().map((db) => db.destroy()));
    afterClosing();
  });
  const knexOf = new WeakMap<FileStore, Knex>();

  async function migratedDatabase(open: Open): Promise<TestDatabase> {
    const spare = spares.get(open)?.pop();
    if (spare) {
      opened().databases.push(spare);
      return spare;
    }
    const db = await open({ prepare: copyMigratedSqlite });
    opened().databases.push(db);
    await migrate(db.knex);
    if (db.config.client === 'pg') openOf.set(db, open);
    return db;
  }

  /** Prepared reads on `db` when asked, closed after the tests. */
  function readsOn(db: TestDatabase, prepared: boolean) {
    if (!prepared) return undefined;
    const reader = preparedReadsOn(db);
    opened().closers.push(() => reader.close());
    return reader.reads;
  }

  return {
    /**
     * `test`, whose tests each close what they opened when they end, before their teardowns: a
     * file of a hundred PostgreSQL tests holds the connections of the few running, not also the
     * idle pools of every test that ended within the pools' idle timeout.
     */
    eachTestCloses<T>(test: TestFn<T>): TestFn<T> {
      const closing = (title: string, run: (t: ExecutionContext<T>) => unknown) =>
        test(title, async (t) => {
          const own: Opened = { closers: [], databases: [] };
          try {
            return await ofTest.run(own, () => run(t));
          } finally {
            await closeAll(own, spares, openOf);
          }
        });
      return closing as unknown as TestFn<T>;
    },
    migratedDatabase,
    /** Closed with the test (or after the file's tests), before the databases. */
    closeAfter(close: () => Promise<void>) {
      opened().closers.push(close);
    },
    migrated: async (open: Open) => (await migratedDatabase(open)).knex,

    async keyStore(open: Open, { prepared = false } = {}) {
      const db = await migratedDatabase(open);
      const preparedReads = readsOn(db, prepared);
      return new KnexKeyStore(db.knex, { ...CONTRACT_STORE_OPTIONS, ...(preparedReads && { preparedReads }) });
    },

    /**
     * Two views of one database, as two server processes have: two pools on PostgreSQL; on SQLite
     * one pool, whose driver waits for another connection's lock synchronously, in this same
     * process (across processes: `rotationAcrossProcesses`).
     */
    async keyViews(open: Open): Promise<[KnexKeyStore, KnexKeyStore]> {
      const db = await migratedDatabase(open);
      if (db.config.client !== 'pg') return [new KnexKeyStore(db.knex, CONTRACT_STORE_OPTIONS), new KnexKeyStore(db.knex, CONTRACT_STORE_OPTIONS)];
      const other = knexFactory(db.config);
      opened().closers.push(() => other.destroy());
      return [new KnexKeyStore(db.knex, CONTRACT_STORE_OPTIONS), new KnexKeyStore(other, CONTRACT_STORE_OPTIONS)];
    },

    /** Two KnexKeyChanges on one database, as two processes hold them; the subscriber polls every 20 ms. */
    async keyChangesPair(open: Open) {
      const { knex } = await migratedDatabase(open);
      const subscriber = new KnexKeyChanges(knex, { intervalMs: 20 });
      opened().closers.push(async () => subscriber.close());
      return { publisher: new KnexKeyChanges(knex), subscriber, carriesIds: false };
    },

    usageStore: async (open: Open) => new KnexUsageStore((await migratedDatabase(open)).knex, CONTRACT_STORE_OPTIONS),

    async fileStore(open: Open, { prepared = false } = {}): Promise<FileStore> {
      const db = await migratedDatabase(open);
      const preparedReads = readsOn(db, prepared);
      const store = new KnexFileStore(db.knex, { ...CONTRACT_STORE_OPTIONS, ...(preparedReads && { preparedReads }) });
      knexOf.set(store, db.knex);
      return store;
    },

    /** Ten thousand creations one by one would take a minute on a database: inserts the rows directly. */
    async seedFiles(store: FileStore, files: FileRecord[]): Promise<void> {
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
    },
  };
}

export type ContractStores = ReturnType<typeof contractStores>;

const ROTATION_WORKER = fileURLToPath(new URL('./key-rotation-worker.js', import.meta.url));

/** Key rotation's race across processes, which the contract (one process) cannot stage. */
export function rotationAcrossProcesses(test: TestFn, name: string, stores: ContractStores, open: Open): void {
  test(`${name}: ten rotations of one key at once, across two processes, make exactly one new key`, async (t) => {
    const db = await stores.migratedDatabase(open);
    const store = new KnexKeyStore(db.knex);
    const old = await store.create({ account: 'parallel', hash: hashApiKey('kmg_sk_parallel'), scopes: ['models:read'], models: null, expiresAt: null });
    const job = { config: db.config, id: old.id, count: 5, nowSeconds: Date.now() / 1000 };
    const outputs = await runTogether(ROTATION_WORKER, [[JSON.stringify(job)], [JSON.stringify(job)]]);
    const outcomes = outputs.flatMap((line) => JSON.parse(line) as string[]).sort();
    t.deepEqual(outcomes, ['replaced', 'replaced', 'replaced', 'replaced', 'replaced', 'replaced', 'replaced', 'replaced', 'replaced', 'rotated']);
    t.is((await store.list({ account: 'parallel' })).length, 2);
  });
}

/** The recorder tries a failed batch again: a batch stored in part would then be counted twice. */
export function partialBatchStoresNothing(test: TestFn, name: string, open: () => Promise<KnexUsageStore>): void {
  test(`${name}: a batch with one record the database refuses (its 651st) stores nothing, in the roll-ups neither; tried again, it counts once`, async (t) => {
    const store = await open();
    const batch = Array.from({ length: 700 }, () => usageRecord());
    const refused = { ...usageRecord(), account: null as unknown as string };
    await t.throwsAsync(store.insert(batch.with(650, refused)), { any: true });
    t.deepEqual(await store.list(), []);
    t.deepEqual(await store.summarize({}, 'day'), []);
    await store.insert(batch);
    t.like((await store.summarize({}, 'day'))[0], { requests: 700, inputTokens: 7000 });
  });
}
