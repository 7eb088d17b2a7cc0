import { createHash } from 'node:crypto';
import type { Knex } from 'knex';

/**
 * Reads of at most one row by a fixed SQL text, prepared once, on a driver handle beside Knex.
 * The Knex stores take one (`preparedReads`) for the reads on every request, a key by its hash
 * and a file by its id: Knex's query builder, compiler and per-query `prepare` cost several times
 * the lookup itself (docs/DECISIONS.md, "Performance"). Make one with `sqlitePreparedReads` or
 * `postgresPreparedReads`, on the same database as the stores' Knex.
 */
export interface PreparedReads {
  /** A read by `sql` (in the dialect of the stores' Knex): its first row for `bindings`, or undefined, or a promise of either. */
  prepare(sql: string): (bindings: readonly unknown[]) => unknown;
}

/** The part of a better-sqlite3 `Database` that `sqlitePreparedReads` uses. */
export interface SqliteDatabaseLike {
  prepare(sql: string): { get(...bindings: unknown[]): unknown };
}

/**
 * Prepared reads on a better-sqlite3 `Database` of their own, which the caller opens on the
 * stores' database file and closes after them. Open it `readonly` on a file in WAL mode: a WAL
 * reader sees committed rows only, so the reads never wait for Knex's connection or for a
 * transaction in progress on it.
 * @example
 * const reader = new Database(filename, { readonly: true });
 * const keys = new KnexKeyStore(knex, { preparedReads: sqlitePreparedReads(reader) });
 */
export function sqlitePreparedReads(database: SqliteDatabaseLike): PreparedReads {
  return {
    prepare(sql) {
      // Prepared on first use: the stores are made before `migrate` creates their tables.
      let statement: ReturnType<SqliteDatabaseLike['prepare']> | undefined;
      return (bindings) => (statement ??= database.prepare(sql)).get(...bindings);
    },
  };
}

/** The part of a pg `Pool` that `postgresPreparedReads` uses. */
export interface PgPoolLike {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
}

/**
 * Prepared reads on a pg `Pool` as named statements, which pg prepares once per connection. Give
 * it the pool that Knex runs on (Knex's `connectionPool` option) so that both share its
 * connections. Named statements need a session per connection: not behind a PgBouncer in
 * transaction mode.
 * @example
 * const pool = new pg.Pool({ connectionString });
 * const knex = knexFactory({ client: 'pg', connectionPool: pool });
 * const files = new KnexFileStore(knex, { preparedReads: postgresPreparedReads(pool) });
 */
export function postgresPreparedReads(pool: PgPoolLike): PreparedReads {
  return {
    prepare(text) {
      // Named by content: stores preparing the same text share it, different texts never collide.
      const name = `kmg_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
      return async (bindings) => (await pool.query({ name, text, values: [...bindings] })).rows[0];
    },
  };
}

/**
 * A read of at most one row (by a unique key), written once as a Knex select (`build`, every
 * parameter used once as a binding). Without `reads` it runs through Knex. With `reads` it runs
 * as the SQL text Knex compiles it to (`toSQL().toNative()`), prepared once: the query is
 * compiled a single time, with markers in place of the arguments, whose places in the bindings
 * take each call's arguments. Name the columns rather than `select *`: a later migration must not
 * change a prepared result. No `first()` or `limit`: SQLite plans a bound `limit ?` at several
 * times the cost of the lookup, and a unique key needs none.
 * @example
 * const byHash = firstRowReader(reads, (hash: string) => knex('kmg_api_keys').where({ hash }).select('id', 'account'));
 * const row = await byHash(hash);
 */
export function firstRowReader<Args extends unknown[], Row>(
  reads: PreparedReads | undefined,
  build: (...args: Args) => Knex.QueryBuilder,
): (...args: Args) => Row | undefined | Promise<Row | undefined> {
  if (!reads) return async (...args) => ((await build(...args)) as Row[])[0];
  const markers = Array.from({ length: build.length }, (_, index) => `\u0000kmg-argument-${index}\u0000`);
  const { sql, bindings } = build(...(markers as Args))
    .toSQL()
    .toNative();
  const places = bindings.map((binding) => markers.indexOf(binding as string));
  for (const [index] of markers.entries()) {
    if (places.filter((place) => place === index).length !== 1) {
      throw new TypeError(`koa-model-gateway: argument ${index} of a prepared read is not one binding of ${sql}`);
    }
  }
  const read = reads.prepare(sql);
  return (...args) => read(places.map((place, index) => (place === -1 ? bindings[index] : args[place]))) as Row | undefined | Promise<Row | undefined>;
}
