import type { Knex } from 'knex';

/** The part of a better-sqlite3 connection this file uses. */
interface SqliteConnection {
  prepare(sql: string): { get(...bindings: unknown[]): unknown };
  pragma(source: string, options?: { simple: boolean }): unknown;
  close(): unknown;
}

/** The part of a pg client this file uses. */
interface PgConnection {
  query(query: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
}

type KnexClient = {
  driverName?: string;
  connectionSettings?: { filename?: unknown };
  pool?: { on(event: 'destroySuccess', listener: () => void): void };
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<unknown>;
  acquireRawConnection(): Promise<unknown>;
};

type OnPoolConnection = <T>(use: (connection: unknown) => T) => Promise<T>;

/**
 * A second connection to a SQLite file in WAL mode, for the prepared reads only. A WAL reader
 * sees only committed rows, so it needs no turn on the pool's one connection: the acquire and
 * release around a read cost more than the read (BENCHMARKS.md), and a read no longer waits for
 * a transaction in progress. Opened on the first read, after the pool's own connection (whose
 * `afterCreate` sets WAL); `query_only`; closed when the pool destroys a connection, and opened
 * again on the next read. `undefined` where none can be had (`:memory:`, a rollback journal, no
 * pool): the reads then take the pool's connection.
 */
function walReader(client: KnexClient, onPool: OnPoolConnection): () => Promise<SqliteConnection | undefined> {
  let reader: Promise<SqliteConnection | undefined> | undefined;
  let listening: object | undefined;
  const close = () => {
    const closing = reader;
    reader = undefined;
    void closing?.then((connection) => connection?.close());
  };

  async function open(): Promise<SqliteConnection | undefined> {
    const { filename } = client.connectionSettings ?? {};
    if (typeof filename !== 'string' || filename === '' || filename.includes(':memory:') || filename.startsWith('file:')) return undefined;
    const journalMode = await onPool((connection) => (connection as SqliteConnection).pragma('journal_mode', { simple: true }));
    const { pool } = client;
    if (journalMode !== 'wal' || !pool) return undefined;
    let connection: SqliteConnection | undefined;
    try {
      connection = (await client.acquireRawConnection()) as SqliteConnection;
      connection.pragma('query_only = ON');
      connection.pragma('busy_timeout = 5000');
    } catch {
      connection?.close();
      return undefined;
    }
    if (listening !== pool) {
      pool.on('destroySuccess', close);
      listening = pool;
    }
    return connection;
  }

  return () => {
    if (!client.pool) return Promise.resolve(undefined);
    // A failure (the database unreachable) fails this read only: the next one tries again.
    reader ??= open().catch((err: unknown) => {
      reader = undefined;
      throw err;
    });
    return reader;
  };
}

// One reader per Knex client, whatever the number of prepared reads on it.
const walReaders = new WeakMap<object, () => Promise<SqliteConnection | undefined>>();

/** `?` placeholders as PostgreSQL's `$1`, `$2`, … (the SQL texts here hold no other `?`). */
function numberedPlaceholders(sql: string): string {
  let index = 0;
  return sql.replace(/\?/g, () => `$${++index}`);
}

/**
 * A read of at most one row by a fixed SQL text (with `?` placeholders), prepared once per
 * connection: better-sqlite3 keeps the statement per connection (on a file in WAL mode, a
 * connection of its own: see `walReader`), PostgreSQL runs it as the named prepared statement
 * `name`. Any other client, or a transaction, runs `fallback` (the same read through Knex's query
 * builder).
 *
 * For the reads on every request (a key by its hash, a file by its id): Knex's query builder,
 * compiler and per-query `prepare` cost several times the lookup itself on SQLite (BENCHMARKS.md).
 * Name the columns rather than `select *`: PostgreSQL refuses a prepared statement whose result
 * columns changed under it. Named statements need a session of their own per connection: not
 * behind a PgBouncer in transaction mode.
 * @example
 * const byHash = preparedRead(knex, 'kmg_key_by_hash', 'select id, account from kmg_api_keys where hash = ?',
 *   (hash: string) => knex('kmg_api_keys').where({ hash }).first('id', 'account'));
 * const row = await byHash(hash);
 */
export function preparedRead<Row, Bindings extends unknown[]>(
  knex: Knex,
  name: string,
  sql: string,
  fallback: (...bindings: Bindings) => Promise<Row | undefined>,
): (...bindings: Bindings) => Promise<Row | undefined> {
  const client = knex.client as KnexClient;
  if (knex.isTransaction) return fallback;

  async function onConnection<T>(use: (connection: unknown) => Promise<T> | T): Promise<T> {
    const connection = await client.acquireConnection();
    try {
      return await use(connection);
    } finally {
      await client.releaseConnection(connection);
    }
  }

  if (client.driverName === 'better-sqlite3') {
    const statements = new WeakMap<object, ReturnType<SqliteConnection['prepare']>>();
    const read = (sqlite: SqliteConnection, bindings: unknown[]) => {
      let statement = statements.get(sqlite);
      if (!statement) {
        statement = sqlite.prepare(sql);
        statements.set(sqlite, statement);
      }
      return statement.get(...bindings) as Row | undefined;
    };
    let reader = walReaders.get(client);
    if (!reader) {
      reader = walReader(client, onConnection);
      walReaders.set(client, reader);
    }
    return async function preparedRead(...bindings) {
      const sqlite = await reader();
      return sqlite ? read(sqlite, bindings) : onConnection((connection) => read(connection as SqliteConnection, bindings));
    };
  }
  if (client.driverName === 'pg') {
    const text = numberedPlaceholders(sql);
    return async function preparedRead(...bindings) {
      return onConnection(async (connection) => {
        const { rows } = await (connection as PgConnection).query({ name, text, values: bindings });
        return rows[0] as Row | undefined;
      });
    };
  }
  return fallback;
}
