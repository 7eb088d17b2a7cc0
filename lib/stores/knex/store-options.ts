import type { Knex } from 'knex';
import { StoreUnavailableError } from '../../errors/gateway-error.js';
import type { PreparedReads } from './prepared-reads.js';
import type { PreparedWrites, ReportReads } from './sqlite-writer.js';

/** Options of the Knex stores of keys, files, admin tokens and admin sessions. */
export interface KnexStoreOptions {
  /**
   * The reads on every request (a key by its hash, a file by its id) as prepared statements on a
   * driver handle beside Knex (`sqlitePreparedReads`, `postgresPreparedReads`), for `KnexKeyStore`
   * and `KnexFileStore`. Default: through Knex.
   */
  preparedReads?: PreparedReads;
  /**
   * `KnexUsageStore`'s batch inserts as prepared statements run off the event loop
   * (`sqliteWriter`). Once the writer is gone (failed or closed), inserts go through Knex again.
   * Default: through Knex.
   */
  preparedWrites?: PreparedWrites;
  /**
   * The admin API's reads over many rows run off the event loop (`sqliteReader`):
   * `KnexUsageStore`'s summaries (every usage report), `KnexKeyStore`'s list and `KnexFileStore`'s
   * usage of an account. Once the reader is gone (failed or closed), they go through Knex again.
   * Default: through Knex.
   */
  reportReads?: ReportReads;
  /**
   * How long one store call may take, waiting for a connection included, in milliseconds. Past it
   * the call fails with a `StoreUnavailableError` (503 `service_unavailable`), and a creation
   * still running rolls back rather than commit: on PostgreSQL its connection is destroyed, which
   * ends its session and its locks however stalled the connection is. Default: 5000.
   */
  timeoutMs?: number;
}

export const DEFAULT_STORE_TIMEOUT_MS = 5000;

/** `timeoutMs`, validated once in a store's constructor. */
export function storeTimeoutMs(options: KnexStoreOptions): number {
  const timeoutMs = options.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
    throw new TypeError('koa-model-gateway: a Knex store timeoutMs must be a positive integer of milliseconds');
  }
  return timeoutMs;
}

const abandoned = () => undefined;

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as PromiseLike<unknown>).then === 'function';

/**
 * Runs one store call within `timeoutMs`: rejects with a `StoreUnavailableError` when the call has
 * not settled by then. Any thenable counts as a call still running (a Knex query builder or
 * Transaction is one, not a native Promise). The call itself cannot be stopped from here: it goes
 * on, its outcome ignored. `expired()` tells it that its caller has been answered, so that it can
 * roll back instead of committing, and `whenExpired(listener)` calls `listener` at that moment (one
 * listener; it returns the function that takes it back), so that it can let go of what it holds
 * (`transactionWithinTimeout` destroys its connection). A call that answers synchronously (a
 * prepared read on SQLite) needs no timer: nothing could have interrupted it.
 */
export function withinTimeout<T>(
  timeoutMs: number,
  call: (expired: () => boolean, whenExpired: (listener: () => void) => () => void) => T | PromiseLike<T>,
): Promise<T> {
  let expired = false;
  let onExpiry: (() => void) | undefined;
  const whenExpired = (listener: () => void) => {
    onExpiry = listener;
    return () => {
      if (onExpiry === listener) onExpiry = undefined;
    };
  };
  const running = call(() => expired, whenExpired);
  if (!isThenable(running)) return Promise.resolve(running);
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      expired = true;
      onExpiry?.();
      reject(new StoreUnavailableError(`the database did not answer within ${timeoutMs} ms`));
    }, timeoutMs);
    running.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/**
 * Runs `work` in a transaction within `timeoutMs`, waiting for a connection included, like
 * `withinTimeout`. At the deadline the transaction is given up for good: on a networked database
 * its connection is destroyed, which rolls the transaction back on the server (its locks with it)
 * however stalled the connection is, and the pool opens a new one. Knex could only queue a
 * ROLLBACK behind the statement that stalls. SQLite's driver answers synchronously, so nothing
 * there stalls between statements; `expired()` makes its `work` roll back instead.
 * @example
 * await transactionWithinTimeout(knex, 5000, async (trx, expired) => {
 *   await trx('accounts').insert(row);
 *   if (expired()) throw new StoreUnavailableError('outlasted its timeout'); // roll back
 * });
 */
export function transactionWithinTimeout<T>(knex: Knex, timeoutMs: number, work: (trx: Knex.Transaction, expired: () => boolean) => Promise<T>): Promise<T> {
  const client = knex.client as Knex.Client;
  return withinTimeout(timeoutMs, async (expired, whenExpired) => {
    const connection: unknown = await client.acquireConnection();
    const destroy = () => {
      client.destroyRawConnection(connection).catch(abandoned);
    };
    const stopWatching = client.dialect !== 'sqlite3' ? whenExpired(destroy) : undefined;
    try {
      if (expired()) throw new StoreUnavailableError('a connection came after the timeout');
      return await knex.transaction((trx) => work(trx, expired), { connection });
    } finally {
      stopWatching?.();
      await client.releaseConnection(connection);
    }
  });
}
