import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { migrate } from '../lib/stores/knex/migrations.js';
import { ConfigError } from './config-error.js';
import type { DatabaseSettings } from './config.js';

interface SqliteConnection {
  pragma(source: string): unknown;
}

/** A Knex pool on the configured database; the SQLite file's directory is created if missing. */
export function openDatabase(settings: DatabaseSettings): Knex {
  if (settings.client === 'pg') {
    return knexFactory({
      client: 'pg',
      connection: { connectionString: settings.connectionString, connectionTimeoutMillis: 5000 },
      pool: { min: 0, max: 10 },
      acquireConnectionTimeout: 10_000,
    });
  }
  try {
    mkdirSync(dirname(settings.filename), { recursive: true });
  } catch (err) {
    throw new ConfigError(`cannot create the directory of ${settings.filename} (${(err as NodeJS.ErrnoException).code})`);
  }
  return knexFactory({
    client: 'better-sqlite3',
    connection: { filename: settings.filename },
    useNullAsDefault: true,
    pool: {
      // WAL lets readers run beside the writer; busy_timeout makes the server and the CLI wait
      // for each other's write transactions instead of failing with SQLITE_BUSY.
      afterCreate(connection: SqliteConnection, done: (err: Error | null, connection: SqliteConnection) => void) {
        try {
          connection.pragma('journal_mode = WAL');
          connection.pragma('busy_timeout = 5000');
          done(null, connection);
        } catch (err) {
          done(err as Error, connection);
        }
      },
    },
  });
}

/** Where the database is, for messages: the SQLite path or the PostgreSQL host and database, never a password. */
export function describeDatabase(settings: DatabaseSettings): string {
  return settings.client === 'pg' ? settings.display : `sqlite:${settings.filename}`;
}

/**
 * Opens the database and brings it to the latest schema. A database that cannot be reached or
 * migrated is a start-up failure with one line saying where and why.
 */
export async function openMigratedDatabase(settings: DatabaseSettings): Promise<Knex> {
  const knex = openDatabase(settings);
  try {
    await migrate(knex);
  } catch (err) {
    await knex.destroy();
    const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new ConfigError(`cannot open the database at ${describeDatabase(settings)} (${reason})`);
  }
  return knex;
}
