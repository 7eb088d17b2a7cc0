import test from 'ava';
import { cachedKeyStore } from '../../lib/auth/cached-key-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { fileURLToPath } from 'node:url';
import knexFactory from 'knex';
import { hashApiKey } from '../../lib/auth/keys.js';
import { keyRotationContract, keyStoreContract } from '../../lib/testing/key-store-contract.js';
import { preparedReadsOn, type TestPreparedReads } from '../helpers/prepared-reads.js';
import { runTogether } from '../helpers/worker-processes.js';
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

/**
 * Two views of one database, as two server processes have: two pools on PostgreSQL; on SQLite one
 * pool, whose driver waits for another connection's lock synchronously, in this same process
 * (across processes: the test below).
 */
async function knexViews(open: () => Promise<TestDatabase>): Promise<[KnexKeyStore, KnexKeyStore]> {
  const db = await open();
  databases.push(db);
  await migrate(db.knex);
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
    const db = await open();
    databases.push(db);
    await migrate(db.knex);
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
