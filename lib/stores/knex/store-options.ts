import { StoreUnavailableError } from '../../errors/gateway-error.js';
import type { PreparedReads } from './prepared-reads.js';
import type { PreparedWrites } from './sqlite-writer.js';

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
   * How long one store call may take, waiting for a connection included, in milliseconds. Past it
   * the call fails with a `StoreUnavailableError` (503 `service_unavailable`), and a creation
   * still running rolls back rather than commit. Default: 5000.
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

/**
 * Runs one store call within `timeoutMs`: rejects with a `StoreUnavailableError` when the call has
 * not settled by then. The call itself cannot be stopped; it goes on, its outcome ignored, until
 * the driver's own timeouts end it. `expired()` tells it that its caller has been answered, so
 * that it can roll back instead of committing. A call that answers synchronously (a prepared read
 * on SQLite) needs no timer: nothing could have interrupted it.
 */
export function withinTimeout<T>(timeoutMs: number, call: (expired: () => boolean) => T | Promise<T>): Promise<T> {
  let timedOut = false;
  const running = call(() => timedOut);
  if (!(running instanceof Promise)) return Promise.resolve(running);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      running.catch(abandoned);
      reject(new StoreUnavailableError(`the database did not answer within ${timeoutMs} ms`));
    }, timeoutMs);
  });
  return Promise.race([running, deadline]).finally(() => clearTimeout(timer));
}
