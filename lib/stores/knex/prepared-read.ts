import type { Knex } from 'knex';

/** The part of a better-sqlite3 connection this file uses. */
interface SqliteConnection {
  prepare(sql: string): { get(...bindings: unknown[]): unknown };
}

/** The part of a pg client this file uses. */
interface PgConnection {
  query(query: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
}

type KnexClient = {
  driverName?: string;
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<unknown>;
};

/** `?` placeholders as PostgreSQL's `$1`, `$2`, … (the SQL texts here hold no other `?`). */
function numberedPlaceholders(sql: string): string {
  let index = 0;
  return sql.replace(/\?/g, () => `$${++index}`);
}

/**
 * A read of at most one row by a fixed SQL text (with `?` placeholders), prepared once per
 * connection: better-sqlite3 keeps the statement per connection, PostgreSQL runs it as the named
 * prepared statement `name`. Any other client, or a transaction, runs `fallback` (the same read
 * through Knex's query builder).
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
    return async function preparedRead(...bindings) {
      return onConnection((connection) => {
        const sqlite = connection as SqliteConnection;
        let statement = statements.get(sqlite);
        if (!statement) {
          statement = sqlite.prepare(sql);
          statements.set(sqlite, statement);
        }
        return statement.get(...bindings) as Row | undefined;
      });
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
