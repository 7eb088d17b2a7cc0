import type { Knex } from 'knex';
import type { KeyChanges } from '../../auth/key-changes.js';
import { storeTimeoutMs, withinTimeout } from './store-options.js';

const TABLE = 'kmg_key_version';

interface Loop {
  timer?: NodeJS.Timeout;
  /** The version last read; none before the first read. */
  version?: string;
}

export interface KnexKeyChangesOptions {
  /** How often each subscribed process reads the version, in ms: the longest a change goes unheard. Default 250. */
  intervalMs?: number;
  /** How long a publish or a read may take, waiting for a connection included, in ms; past it a publish fails with a `StoreUnavailableError`. Default 5000. */
  timeoutMs?: number;
}

/**
 * KeyChanges on the database, for deployments without Redis: `publish` counts up one version
 * row, and a subscribed process reads that row every `intervalMs` (one primary-key read) and
 * tells its listeners when it moved, without an id: anything may have changed. The first read
 * after subscribing tells them too, since nothing says what happened before it. A read that
 * fails, or stalls past `timeoutMs`, is tried again at the next interval; the key lookups
 * themselves report the outage. Run `migrate(knex)` first; `close()` stops the reads.
 * @example const changes = new KnexKeyChanges(knex); cachedKeyStore(announceKeyChanges(keys, changes), { changes })
 */
export class KnexKeyChanges implements KeyChanges {
  readonly #knex: Knex;
  readonly #intervalMs: number;
  readonly #timeoutMs: number;
  readonly #listeners = new Set<(id?: string) => void>();
  /** The polling loop now running; a loop that is no longer this one stops. */
  #loop: Loop | undefined;

  constructor(knex: Knex, options: KnexKeyChangesOptions = {}) {
    const { intervalMs = 250 } = options;
    if (!Number.isFinite(intervalMs) || intervalMs <= 0) throw new TypeError('koa-model-gateway: KnexKeyChanges intervalMs must be a positive number');
    this.#knex = knex;
    this.#intervalMs = intervalMs;
    this.#timeoutMs = storeTimeoutMs(options);
  }

  async publish(_id: string): Promise<void> {
    await withinTimeout(this.#timeoutMs, () => this.#knex(TABLE).where({ id: 1 }).increment('version', 1));
  }

  subscribe(listener: (id?: string) => void): () => void {
    const own = () => listener();
    this.#listeners.add(own);
    if (this.#loop === undefined) {
      this.#loop = {};
      this.#schedule(this.#loop, 0);
    } else if (this.#loop.version !== undefined) {
      // Already listening: this listener's first call is now, not at the loop's first read.
      queueMicrotask(() => {
        if (this.#listeners.has(own)) own();
      });
    }
    return () => {
      this.#listeners.delete(own);
      if (this.#listeners.size === 0) this.close();
    };
  }

  /** Stops reading the version; the listeners hear nothing more. */
  close(): void {
    clearTimeout(this.#loop?.timer);
    this.#loop = undefined;
    this.#listeners.clear();
  }

  // One read at a time, each scheduled when the last has ended; unref'd: it never keeps a process alive.
  #schedule(loop: Loop, delayMs: number): void {
    loop.timer = setTimeout(() => void this.#read(loop), delayMs).unref();
  }

  async #read(loop: Loop): Promise<void> {
    try {
      const row = await withinTimeout(this.#timeoutMs, () => this.#knex(TABLE).where({ id: 1 }).first('version'));
      // pg answers a bigint as a string, SQLite as a number.
      const version = String((row as { version: number | string } | undefined)?.version);
      if (loop !== this.#loop) return;
      if (version !== loop.version) {
        loop.version = version;
        for (const listener of this.#listeners) listener();
      }
    } catch {
      // The database is away: the next read compares with the last version seen.
    }
    if (loop === this.#loop) this.#schedule(loop, this.#intervalMs);
  }
}
