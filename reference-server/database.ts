import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { migrate } from 'koa-model-gateway/stores/knex';
import { ConfigError } from './config-error.js';
import type { DatabaseSettings } from './config.js';
import { missingPackages } from './peers.js';

interface SqliteConnection {
  pragma(source: string): unknown;
}

/** Where Knex's own warnings go; by default nowhere, since every failure also reaches the caller. */
export type DatabaseLog = (level: 'warn' | 'error', message: string) => void;

function knexLog(log: DatabaseLog): Knex.Logger {
  const text = (message: unknown) => (message instanceof Error ? message.message : String(message));
  return {
    warn: (message: unknown) => log('warn', text(message)),
    error: (message: unknown) => log('error', text(message)),
    deprecate: (method: string, alternative: string) => log('warn', `${method} is deprecated, use ${alternative}`),
    debug: () => undefined,
  };
}

/** A Knex pool on the configured database; the SQLite file's directory is created if missing. */
export function openDatabase(settings: DatabaseSettings, log: DatabaseLog = () => undefined): Knex {
  // Knex loads the driver itself, and would fail with a require stack.
  const driver = settings.client === 'pg' ? 'pg' : 'better-sqlite3';
  if (missingPackages([driver]).length > 0) {
    throw new ConfigError(`${describeDatabase(settings)} needs the driver ${driver}, not installed: npm install ${driver}`);
  }
  if (settings.client === 'pg') {
    return knexFactory({
      log: knexLog(log),
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
    log: knexLog(log),
    client: 'better-sqlite3',
    connection: { filename: settings.filename },
    useNullAsDefault: true,
    pool: {
      // WAL lets readers run beside the writer; busy_timeout makes the server and the CLI wait
      // for each other's write transactions instead of failing with SQLITE_BUSY. With WAL,
      // synchronous = NORMAL syncs at checkpoints instead of at every commit: a commit survives
      // a crash of the process, and only a power loss may undo the last ones (a file record then
      // gone leaves an orphan blob, which the sweep removes). A commit's fsync would otherwise
      // stop the event loop, every upload with it, for the whole flush.
      afterCreate(connection: SqliteConnection, done: (err: Error | null, connection: SqliteConnection) => void) {
        try {
          connection.pragma('journal_mode = WAL');
          connection.pragma('synchronous = NORMAL');
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
export async function openMigratedDatabase(settings: DatabaseSettings, log?: DatabaseLog): Promise<Knex> {
  const knex = openDatabase(settings, log);
  try {
    await migrate(knex);
  } catch (err) {
    await knex.destroy();
    // Driver messages say what is wrong (refused, no such database, authentication failed) without the password.
    const reason = ((err as Error).message ?? String(err)).split('\n')[0]?.slice(0, 200);
    throw new ConfigError(`cannot open the database at ${describeDatabase(settings)}: ${reason}`);
  }
  return knex;
}
