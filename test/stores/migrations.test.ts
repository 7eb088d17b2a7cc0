import { spawn } from 'node:child_process';
import test, { type ExecutionContext } from 'ava';
import type { Knex } from 'knex';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';

const databases: TestDatabase[] = [];
test.after.always(() => Promise.all(databases.map((db) => db.destroy())));

const WORKER = new URL('../helpers/migrate-worker.ts', import.meta.url).pathname;

function migrateInProcess(config: Knex.Config): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(config)]);
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stderr }));
  });
}

async function migratedTogether(t: ExecutionContext, open: () => Promise<TestDatabase>) {
  const db = await open();
  databases.push(db);
  const results = await Promise.all(Array.from({ length: 4 }, () => migrateInProcess(db.config)));
  for (const { code, stderr } of results) t.is(code, 0, stderr);
  t.deepEqual(await db.knex('kmg_migrations_lock').select('index', 'is_locked'), [{ index: 1, is_locked: 0 }]);
  t.deepEqual((await db.knex('kmg_migrations').orderBy('id').pluck('name')), ['001_api_keys', '002_files', '003_key_limits', '004_usage']);
  t.true(await db.knex.schema.hasTable('kmg_files'));
}

test('four processes migrating a fresh SQLite database at once all succeed, and migrate it once', (t) =>
  migratedTogether(t, sqliteDatabase));

withPostgres(test)('four processes migrating a fresh PostgreSQL schema at once all succeed, and migrate it once', (t) =>
  migratedTogether(t, postgresDatabase));

test('migrate can run again on a migrated database', async (t) => {
  const db = await sqliteDatabase();
  databases.push(db);
  await migrate(db.knex);
  await t.notThrowsAsync(migrate(db.knex));
});
