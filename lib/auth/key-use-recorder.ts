import type { RecorderTimers } from '../usage/usage-recorder.js';
import type { KeyStore } from './key-store.js';

export interface KeyUseRecorderOptions {
  /** Where the last uses are written (`KeyStore.touch`). */
  store: Pick<KeyStore, 'touch'>;
  /** The least time between two writes of one key's last use, in ms. Default 60,000 (once a minute). */
  intervalMs?: number;
  /** How long uses gather before they are written together, in ms. Default 1000. */
  flushDelayMs?: number;
  /** Hears a failed write (never thrown at the caller of `record`). Default: `process.emitWarning`. */
  onError?: (err: Error) => void;
  /** The clock, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
  /** Default: the global timers, unref'd so that a waiting write does not keep the process alive. */
  timers?: RecorderTimers;
}

/** What `keyUseRecorder()` returns. */
export interface KeyUseRecorder {
  /** Notes a use of the key: synchronous, no I/O; written unless the key's last write is younger than `intervalMs`. */
  record(keyId: string): void;
  /** Writes the uses noted so far; resolves when written or failed (failures go to `onError`). */
  flush(): Promise<void>;
  /** Writes what is noted, once, and stops; uses after it are not written. Call it on shutdown. */
  close(): Promise<void>;
}

const realTimers: RecorderTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * Keeps each key's `lastUsedAt` up to date off the request path: a use is noted in memory, and
 * the uses of `flushDelayMs` are written in one `store.touch`, at most once per `intervalMs` per key
 * (so `lastUsedAt` may be up to a minute old). A request never waits for the write; a failed write
 * is reported to `onError` and not retried: the key's next use after `intervalMs` writes again. Each
 * write is bounded by the store's own timeout (the Knex stores': `timeoutMs`). Memory: one entry per
 * key used within the last `intervalMs`.
 * @example
 * const uses = keyUseRecorder({ store: keys, onError: (err) => logger.warn({ err }, 'key uses') })
 * app.use(apiKey({ store: keys, uses }))
 * await uses.close() // on shutdown
 */
export function keyUseRecorder(options: KeyUseRecorderOptions): KeyUseRecorder {
  const { store, intervalMs = 60_000, flushDelayMs = 1000, onError = (err: Error) => process.emitWarning(err) } = options;
  const { nowMs = Date.now, timers = realTimers } = options;
  if (typeof store?.touch !== 'function') throw new TypeError('koa-model-gateway: keyUseRecorder() needs a KeyStore as `store`');
  for (const [name, value] of Object.entries({ intervalMs, flushDelayMs })) {
    if (!Number.isSafeInteger(value) || value < 0) throw new TypeError(`koa-model-gateway: keyUseRecorder() ${name} must be a non-negative integer`);
  }
  if (typeof onError !== 'function') throw new TypeError('koa-model-gateway: keyUseRecorder() onError must be a function');

  // When each key's use was last noted for a write, oldest first: younger than intervalMs, no write.
  const noted = new Map<string, number>();
  // The uses waiting for the next write, and the time of the latest.
  let waiting = new Set<string>();
  let latestMs = 0;
  const writing = new Set<Promise<void>>();
  let timer: unknown;
  let closed = false;

  function forgetOld(now: number): void {
    for (const [id, at] of noted) {
      if (now - at < intervalMs) return;
      noted.delete(id);
    }
  }

  function flush(): Promise<void> {
    if (timer !== undefined) timers.clearTimeout(timer);
    timer = undefined;
    forgetOld(nowMs());
    if (waiting.size === 0) return Promise.all(writing).then(() => undefined);
    const ids = [...waiting];
    waiting = new Set();
    const write = store.touch(ids, Math.floor(latestMs / 1000)).catch((err: unknown) => {
      try {
        onError(new Error(`koa-model-gateway: the last use of ${ids.length} keys was not written`, { cause: err }));
      } catch {
        // A hook that throws must not turn a write into an unhandled rejection.
      }
    });
    writing.add(write);
    void write.then(() => writing.delete(write));
    return Promise.all(writing).then(() => undefined);
  }

  return {
    record(keyId) {
      if (closed) return;
      const now = nowMs();
      const last = noted.get(keyId);
      if (last !== undefined && now - last < intervalMs) return;
      noted.delete(keyId);
      noted.set(keyId, now);
      waiting.add(keyId);
      latestMs = Math.max(latestMs, now);
      timer ??= timers.setTimeout(() => {
        timer = undefined;
        void flush();
      }, flushDelayMs);
    },
    flush,
    close() {
      closed = true;
      return flush();
    },
  };
}
