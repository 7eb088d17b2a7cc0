import { randomBytes } from 'node:crypto';
import type { TestFn } from 'ava';
import { migratedPostgresSchema } from './migrated-databases.js';
import { asAdmin, POSTGRES_URL, withPostgres } from './services.js';

export interface ThrowawayDatabase {
  /** A DATABASE_URL for a server process. */
  url: string;
  drop(): Promise<void>;
}

/**
 * A PostgreSQL schema of its own on the test server, for a server started as a user starts it
 * (DATABASE_URL, its `search_path` in the URL's `options`): nothing shared with other tests. The
 * schema comes migrated (a spare an earlier test ended with, emptied: migrated-databases.ts), and
 * `drop` hands it on. With `ownDatabase`, a new database of its own instead, migrated by the server
 * that opens it, for a test that tells its connections apart by database
 * (`pg_stat_activity.datname`): dropping a database makes the server write a checkpoint, a second
 * or more on a busy machine.
 */
export async function throwawayPostgres({ ownDatabase = false } = {}): Promise<ThrowawayDatabase> {
  const name = `kmg_${randomBytes(6).toString('hex')}`;
  const url = new URL(POSTGRES_URL);
  if (!ownDatabase) {
    const schema = await migratedPostgresSchema(name);
    // Commits that do not wait for the disk: a test's rows need not survive a crash of the server.
    url.searchParams.set('options', `-c search_path=${name} -c synchronous_commit=off`);
    return { url: url.toString(), drop: schema.release };
  }
  await asAdmin(async (admin) => {
    await admin.raw('create database ??', [name]);
    await admin.raw('alter database ?? set synchronous_commit = off', [name]);
  });
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => asAdmin((admin) => admin.raw('drop database if exists ?? with (force)', [name])) };
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
