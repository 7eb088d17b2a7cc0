import { LRUCache } from 'lru-cache';
import type { ResponseCache } from '../../models/cache/response-cache.js';
import { parseOptions, positiveInteger } from '../../settings/schemas.js';
import { z } from 'zod';

export interface MemoryResponseCacheOptions {
  /** Most entries kept. Default 10,000. */
  maxEntries?: number;
  /** Most bytes kept, entries and keys together (UTF-16 code units counted as bytes). Default 64 MiB (67,108,864). */
  maxBytes?: number;
  /** Largest entry kept: a larger one is declined (`set` answers false). Default 1 MiB (1,048,576). */
  maxEntryBytes?: number;
  /** The clock of the entries' time to live, in milliseconds. Default: `performance.now`. */
  nowMs?: () => number;
}

const memoryCacheOptions = z.object({
  maxEntries: positiveInteger.default(10_000),
  maxBytes: positiveInteger.default(64 * 1024 * 1024),
  maxEntryBytes: positiveInteger.default(1024 * 1024),
});

/**
 * A `ResponseCache` in the process's memory, on `lru-cache`: bounded by entries and by bytes,
 * the least recently used dropped first, each entry gone after its time to live. Each process has
 * its own: several processes each call the upstream once per entry (`RedisResponseCache` shares them).
 * @example modelsRouter({ catalog, providers, cache: { store: new MemoryResponseCache({ maxBytes: 256 * 1024 * 1024 }) } })
 */
export class MemoryResponseCache implements ResponseCache {
  readonly #entries: LRUCache<string, string>;
  readonly #maxEntryBytes: number;

  constructor(options: MemoryResponseCacheOptions = {}) {
    const { maxEntries, maxBytes, maxEntryBytes } = parseOptions(memoryCacheOptions, options, 'MemoryResponseCache');
    this.#maxEntryBytes = maxEntryBytes;
    const { nowMs } = options;
    this.#entries = new LRUCache<string, string>({
      max: maxEntries,
      maxSize: maxBytes,
      maxEntrySize: maxEntryBytes,
      sizeCalculation: (entry, key) => entry.length + key.length,
      // An injected clock is read on every lookup: lru-cache would otherwise keep its time for 1 ms on a timer.
      ...(nowMs && { perf: { now: nowMs }, ttlResolution: 0 }),
    });
  }

  async get(account: string, key: string): Promise<string | undefined> {
    return this.#entries.get(entryKey(account, key));
  }

  async set(account: string, key: string, entry: string, ttlSeconds: number): Promise<boolean> {
    const name = entryKey(account, key);
    if (entry.length + name.length > this.#maxEntryBytes) return false;
    this.#entries.set(name, entry, { ttl: ttlSeconds * 1000 });
    return true;
  }

  async purge(account?: string): Promise<void> {
    if (account === undefined) {
      this.#entries.clear();
      return;
    }
    const prefix = entryKey(account, '');
    for (const name of [...this.#entries.keys()]) if (name.startsWith(prefix)) this.#entries.delete(name);
  }
}

// NUL cannot be in an account name (a control character): no account's prefix is another's.
const entryKey = (account: string, key: string) => `${account}\0${key}`;
