import { randomBytes } from 'node:crypto';
import type { TestFn } from 'ava';
import { asAdmin, POSTGRES_URL, withPostgres } from './services.js';

export interface ThrowawayDatabase {
  /** A DATABASE_URL for a server process. */
  url: string;
  drop(): Promise<void>;
}

/**
 * A PostgreSQL schema of its own on the test server, for a server started as a user starts it
 * (DATABASE_URL, its `search_path` in the URL's `options`): nothing shared with other tests,
 * migrations included. `drop` removes it. With `ownDatabase`, a database of its own instead, for a
 * test that tells its connections apart by database (`pg_stat_activity.datname`): dropping a
 * database makes the server write a checkpoint, a second or more on a busy machine.
 */
export async function throwawayPostgres({ ownDatabase = false } = {}): Promise<ThrowawayDatabase> {
  const name = `kmg_${randomBytes(6).toString('hex')}`;
  const kind = ownDatabase ? 'database' : 'schema';
  await asAdmin(async (admin) => {
    await admin.raw(`create ${kind} ??`, [name]);
    // Commits that do not wait for the disk: a test's rows need not survive a crash of the server.
    if (ownDatabase) await admin.raw('alter database ?? set synchronous_commit = off', [name]);
  });
  const url = new URL(POSTGRES_URL);
  if (ownDatabase) url.pathname = `/${name}`;
  else url.searchParams.set('options', `-c search_path=${name} -c synchronous_commit=off`);
  return {
    url: url.toString(),
    drop: () => asAdmin((admin) => admin.raw(ownDatabase ? 'drop database if exists ?? with (force)' : 'drop schema if exists ?? cascade', [name])),
  };
}

/**
 * A test on each database a server can run on, as `[name, test, database]`: the embedded SQLite
 * (`env` adds nothing), and a throwaway PostgreSQL database (its `DATABASE_URL`; skipped, or failed
 * under CI, when none answers). Call `drop` when the test ends.
 */
export function serverDatabases<T>(test: TestFn<T>) {
  return [
    ['sqlite', test, async () => ({ env: {}, drop: async () => undefined })],
    [
      'postgres',
      withPostgres(test),
      async () => {
        const db = await throwawayPostgres();
        return { env: { DATABASE_URL: db.url }, drop: db.drop };
      },
    ],
  ] as const;
}
