import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test, { type ExecutionContext } from 'ava';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';
import { runTogether } from '../helpers/worker-processes.js';

const databases: TestDatabase[] = [];
test.after.always(() => Promise.all(databases.map((db) => db.destroy())));

const WORKER = fileURLToPath(new URL('../helpers/migrate-worker.js', import.meta.url));
const LEGACY = join(process.cwd(), 'test/fixtures/migrated-before-knex-migrator.json');

async function open(kind: 'sqlite' | 'postgres'): Promise<TestDatabase> {
  const db = await (kind === 'sqlite' ? sqliteDatabase() : postgresDatabase());
  databases.push(db);
  return db;
}

async function migratedOnce(t: ExecutionContext, db: TestDatabase) {
  t.deepEqual(await db.knex('kmg_migrations_lock').select('index', 'is_locked'), [{ index: 1, is_locked: 0 }]);
  t.deepEqual(await db.knex('kmg_migrations').orderBy('id').pluck('name'), ['001_api_keys', '002_files', '003_key_limits', '004_usage', '005_admin_tokens_and_sessions', '006_key_version', '20261125_rotation_replaced_by', 'cost_and_budgets', '20261125_keys_name_hint_links_last_used', '20261125_audit_log', '20261125_routing_attempts']);
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
    // A key as that schema stored it, before the later migrations added columns.
    const hash = 'a'.repeat(64);
    await db.knex('kmg_api_keys').insert({ id: 'key_before', account: 'acme', hash, scopes: '["files:read"]', models: null, created_at: 1_700_000_000, expires_at: null, revoked_at: null });
    await migrate(db.knex);
    await migratedOnce(t, db);
    t.deepEqual(await new KnexKeyStore(db.knex).findByHash(hash), {
      id: 'key_before',
      account: 'acme',
      hash,
      scopes: ['files:read'],
      models: null,
      createdAt: 1_700_000_000,
      expiresAt: null,
      revokedAt: null,
    });
  });
}

test('migrate can run again on a migrated database', async (t) => {
  const db = await open('sqlite');
  await migrate(db.knex);
  await t.notThrowsAsync(migrate(db.knex));
});

withPostgres(test)('postgres: a migration waiting in one schema does not hold up the migration of another', async (t) => {
  const [held, other] = [await open('postgres'), await open('postgres')];
  await migrate(held.knex);
  // The held schema's migration takes its lock, then waits on its bookkeeping table.
  const blocker = await held.knex.transaction();
  await blocker.raw('lock table kmg_migrations in access exclusive mode');
  const waiting = migrate(held.knex);
  try {
    const finished = await Promise.race([
      migrate(other.knex).then(() => 'migrated'),
      new Promise((resolve) => setTimeout(resolve, 10_000, 'still waiting after 10 s')),
    ]);
    t.is(finished, 'migrated');
  } finally {
    await blocker.rollback();
    await waiting;
  }
});
