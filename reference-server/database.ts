import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type Sqlite from 'better-sqlite3';
import knexFactory, { type Knex } from 'knex';
import {
  DEFAULT_STORE_TIMEOUT_MS,
  migrate,
  postgresPreparedReads,
  sqlitePreparedReads,
  sqliteReader,
  sqliteWriter,
  type KnexStoreOptions,
} from 'koa-model-gateway/stores/knex';
import { ConfigError } from './config-error.js';
import type { DatabaseSettings } from './config.js';
import { missingPackages } from './peers.js';

/** PostgreSQL: the connections a server's pool opens at most. */
const DEFAULT_POOL_MAX = 10;

// SQLite's own: a commit that takes the WAL past this many pages checkpoints it.
const SQLITE_AUTOCHECKPOINT = 1000;

/**
 * Where Knex's and the pool's warnings go; by default nowhere, since every failure also reaches the
 * caller. `ofConnections`: a warning about connections (Knex's and the pool's, written on every
 * failed attempt while the database is away), not about this server's own work.
 */
export type DatabaseLog = (level: 'warn' | 'error', message: string, ofConnections: boolean) => void;

export interface DatabaseOptions {
  log?: DatabaseLog;
  /** The bound of every store call, in milliseconds (the stores' `timeoutMs`). Default: 5000. */
  timeoutMs?: number;
  /** On PostgreSQL, the most connections the pool opens. Default: 10. */
  poolMax?: number;
  /**
   * On SQLite, a writer thread (`sqliteWriter`) for a server: it writes the usage records and
   * checkpoints the WAL every this many milliseconds, instead of the event loop and the commits
   * that fill the WAL; and a reader thread (`sqliteReader`) for the usage reports. Default: none;
   * everything on Knex's connection, SQLite's own checkpoints.
   */
  writerCheckpointMs?: number;
}

/** The open database of a server or CLI process. */
export interface Database {
  knex: Knex;
  /** For the Knex stores: prepared reads on the driver handle beside Knex, the usage writer (with `writerCheckpointMs`), and the timeout. */
  storeOptions: KnexStoreOptions;
  /** Closes Knex and the driver handles. */
  close(): Promise<void>;
}

function knexLog(log: DatabaseLog): Knex.Logger {
  const text = (message: unknown) => (message instanceof Error ? message.message : String(message));
  return {
    warn: (message: unknown) => log('warn', text(message), true),
    error: (message: unknown) => log('error', text(message), true),
    deprecate: (method: string, alternative: string) => log('warn', `${method} is deprecated, use ${alternative}`, false),
    debug: () => undefined,
  };
}

/**
 * PostgreSQL: one pg pool, which Knex runs on (`connectionPool`) and the prepared reads use too.
 * Each of the pool's waits ends within the stores' bound: for a pooled connection or a new one
 * (`connectionTimeoutMillis`), and for a statement on the server (`statement_timeout`, which also
 * ends the statements of calls already answered, and their locks, when the database is slow
 * rather than away). A session left in a transaction by a connection that stalled (the stores
 * destroy it at their bound, but a stalled network may not carry even the close) is ended by the
 * server past the same bound
 * (`idle_in_transaction_session_timeout`), so no lock outlives it. `migrate` lifts both for its
 * own session: migrations are not requests, and a busy host stretches their pauses.
 */
async function openPostgres(connectionString: string, log: DatabaseLog, timeoutMs: number, poolMax: number): Promise<Database> {
  // The drivers are optional peers: only the configured one is loaded (and must be installed).
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({
    connectionString,
    max: poolMax,
    connectionTimeoutMillis: timeoutMs,
    statement_timeout: timeoutMs,
    idle_in_transaction_session_timeout: timeoutMs,
    keepAlive: true,
  });
  // pg raises 'error' for a lost connection, and unlistened that ends the process. Lost while
  // idle: the pool drops it and says so. Lost while Knex holds it: the query in flight fails with
  // the cause, and the pool drops it on release.
  pool.on('error', (err) => log('warn', `database connection lost while idle: ${err.message}`, true));
  pool.on('connect', (client) => client.on('error', () => undefined));
  const knex = knexFactory({ log: knexLog(log), client: 'pg', connectionPool: pool });
  const close = async () => {
    await knex.destroy();
    await pool.end();
  };
  try {
    await migrate(knex);
  } catch (err) {
    await close();
    throw err;
  }
  return { knex, storeOptions: { preparedReads: postgresPreparedReads(pool), timeoutMs }, close };
}

/**
 * SQLite: Knex's pool of one connection, and a read-only connection of the server's own for the
 * prepared reads. WAL lets readers run beside the writer; busy_timeout makes the server and the CLI
 * wait for each other's write transactions instead of failing with SQLITE_BUSY. With WAL,
 * synchronous = NORMAL syncs at checkpoints instead of at every commit: a commit survives a crash
 * of the process, and only a power loss may undo the last ones (a file record then gone leaves an
 * orphan blob, which the sweep removes). A commit's fsync would otherwise stop the event loop,
 * every upload with it, for the whole flush.
 */
async function openSqlite(filename: string, log: DatabaseLog, timeoutMs: number, writerCheckpointMs: number | undefined): Promise<Database> {
  // Pages in the WAL at which a commit checkpoints: none while a worker does it, else SQLite's default.
  let autocheckpoint = writerCheckpointMs === undefined ? SQLITE_AUTOCHECKPOINT : 0;
  try {
    mkdirSync(dirname(filename), { recursive: true });
  } catch (err) {
    throw new ConfigError(`cannot create the directory of ${filename} (${(err as NodeJS.ErrnoException).code})`);
  }
  const knex = knexFactory({
    log: knexLog(log),
    client: 'better-sqlite3',
    connection: { filename },
    useNullAsDefault: true,
    pool: {
      afterCreate(connection: Sqlite.Database, done: (err: Error | null, connection: Sqlite.Database) => void) {
        try {
          connection.pragma('journal_mode = WAL');
          connection.pragma('synchronous = NORMAL');
          connection.pragma('busy_timeout = 5000');
          connection.pragma(`wal_autocheckpoint = ${autocheckpoint}`);
          done(null, connection);
        } catch (err) {
          done(err as Error, connection);
        }
      },
    },
  });
  let reader: Sqlite.Database | undefined;
  try {
    await migrate(knex);
    // Opened once the file exists in WAL mode; a WAL reader sees committed rows only.
    const { default: Database } = await import('better-sqlite3');
    reader = new Database(filename, { readonly: true, fileMustExist: true });
  } catch (err) {
    await knex.destroy();
    throw err;
  }
  const database = reader;
  const writer =
    writerCheckpointMs === undefined
      ? undefined
      : sqliteWriter(filename, {
          checkpointIntervalMs: writerCheckpointMs,
          onFailure(err) {
            log('warn', `the SQLite writer thread failed, usage records and checkpoints go through Knex's connection again: ${err.message}`, false);
            autocheckpoint = SQLITE_AUTOCHECKPOINT;
            knex.raw(`pragma wal_autocheckpoint = ${autocheckpoint}`).catch((cause: Error) => log('error', `wal_autocheckpoint: ${cause.message}`, false));
          },
        });
  // A server's usage reports read on a thread of their own: a report over many rows would hold the event loop.
  const reportReader =
    writerCheckpointMs === undefined
      ? undefined
      : sqliteReader(filename, {
          onFailure: (err) => log('warn', `the SQLite reader thread failed, usage reports go through Knex's connection again: ${err.message}`, false),
        });
  return {
    knex,
    storeOptions: {
      preparedReads: sqlitePreparedReads(database),
      ...(writer && { preparedWrites: writer }),
      ...(reportReader && { reportReads: reportReader }),
      timeoutMs,
    },
    async close() {
      await Promise.all([writer?.close(), reportReader?.close()]);
      await knex.destroy();
      database.close();
    },
  };
}

/** Where the database is, for messages: the SQLite path or the PostgreSQL host and database, never a password. */
export function describeDatabase(settings: DatabaseSettings): string {
  return settings.client === 'pg' ? settings.display : `sqlite:${settings.filename}`;
}

/**
 * Opens the configured database (a SQLite file's directory is created if missing) and brings it
 * to the latest schema. A database that cannot be reached or migrated is a start-up failure with
 * one line saying where and why.
 * @example const { knex, storeOptions, close } = await openMigratedDatabase(config.database);
 */
export async function openMigratedDatabase(settings: DatabaseSettings, options: DatabaseOptions = {}): Promise<Database> {
  const log = options.log ?? (() => undefined);
  const timeoutMs = options.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  // Knex loads the driver itself, and would fail with a require stack.
  const driver = settings.client === 'pg' ? 'pg' : 'better-sqlite3';
  if (missingPackages([driver]).length > 0) {
    throw new ConfigError(`${describeDatabase(settings)} needs the driver ${driver}, not installed: npm install ${driver}`);
  }
  try {
    return settings.client === 'pg'
      ? await openPostgres(settings.connectionString, log, timeoutMs, options.poolMax ?? DEFAULT_POOL_MAX)
      : await openSqlite(settings.filename, log, timeoutMs, options.writerCheckpointMs);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    // Driver messages say what is wrong (refused, no such database, authentication failed) without the password.
    const reason = ((err as Error).message ?? String(err)).split('\n')[0]?.slice(0, 200);
    throw new ConfigError(`cannot open the database at ${describeDatabase(settings)}: ${reason}`);
  }
}
