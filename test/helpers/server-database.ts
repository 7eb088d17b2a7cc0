import { randomBytes } from 'node:crypto';
import type { TestFn } from 'ava';
import knexFactory from 'knex';
import { POSTGRES_URL, withPostgres } from './services.js';

export interface ThrowawayDatabase {
  /** A DATABASE_URL for a server process. */
  url: string;
  drop(): Promise<void>;
}

/**
 * A PostgreSQL database of its own on the test server, for a server started as a user starts it
 * (DATABASE_URL): nothing shared with other tests, migrations included. `drop` removes it.
 */
export async function throwawayPostgres(): Promise<ThrowawayDatabase> {
  const name = `kmg_${randomBytes(6).toString('hex')}`;
  // One connection: the statements run one after the other.
  const admin = knexFactory({ client: 'pg', connection: POSTGRES_URL, pool: { min: 0, max: 1 } });
  try {
    await admin.raw('create database ??', [name]);
    // Commits that do not wait for the disk: a test's rows need not survive a crash of the server.
    await admin.raw('alter database ?? set synchronous_commit = off', [name]);
  } finally {
    await admin.destroy();
  }
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const again = knexFactory({ client: 'pg', connection: POSTGRES_URL, pool: { min: 0, max: 1 } });
      try {
        await again.raw('drop database if exists ?? with (force)', [name]);
      } finally {
        await again.destroy();
      }
    },
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
