import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import test, { type ExecutionContext } from 'ava';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';
import { runTogether } from '../helpers/worker-processes.js';

const databases: TestDatabase[] = [];
test.after.always(() => Promise.all(databases.map((db) => db.destroy())));

const WORKER = fileURLToPath(new URL('../helpers/migrate-worker.ts', import.meta.url));
const LEGACY = new URL('../fixtures/migrated-before-knex-migrator.json', import.meta.url);

async function open(kind: 'sqlite' | 'postgres'): Promise<TestDatabase> {
  const db = await (kind === 'sqlite' ? sqliteDatabase() : postgresDatabase());
  databases.push(db);
  return db;
}

async function migratedOnce(t: ExecutionContext, db: TestDatabase) {
  t.deepEqual(await db.knex('kmg_migrations_lock').select('index', 'is_locked'), [{ index: 1, is_locked: 0 }]);
  t.deepEqual(await db.knex('kmg_migrations').orderBy('id').pluck('name'), ['001_api_keys', '002_files']);
  t.true(await db.knex.schema.hasTable('kmg_files'));
}

for (const [kind, gate] of [
  ['sqlite', test],
  ['postgres', withPostgres(test)],
] as const) {
  gate(`${kind}: four processes migrating a fresh database at the same moment all succeed, and migrate it once`, async (t) => {
    const db = await open(kind);
    await runTogether(WORKER, Array.from({ length: 4 }, () => [JSON.stringify(db.config)]));
    await migratedOnce(t, db);
  });

  gate(`${kind}: a database the earlier migrate() made (Knex's bookkeeping tables by hand) is taken as it is, and its stores keep working`, async (t) => {
    const db = await open(kind);
    const legacy = JSON.parse(await readFile(LEGACY, 'utf8')) as Record<typeof kind, string[]>;
    for (const statement of legacy[kind]) await db.knex.raw(statement);
    const keys = new KnexKeyStore(db.knex);
    const before = await keys.create({ account: 'acme', hash: 'a'.repeat(64), scopes: ['files:read'], models: null, expiresAt: null });
    await migrate(db.knex);
    await migratedOnce(t, db);
    t.deepEqual(await keys.findByHash('a'.repeat(64)), before);
  });
}

test('migrate can run again on a migrated database', async (t) => {
  const db = await open('sqlite');
  await migrate(db.knex);
  await t.notThrowsAsync(migrate(db.knex));
});
