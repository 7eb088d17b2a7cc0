import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { ResponseCache } from '../../models/cache/response-cache.js';
import { answerWithin, resolveRedisLimiterOptions } from './redis-limiter.js';

export interface RedisResponseCacheOptions {
  /** An ioredis client made by `createRedisClient()` (`enableOfflineQueue: false`). */
  client: Redis;
  /** Prefix of every key the store writes. Default `kmg:cache`. */
  keyPrefix?: string;
  /** How long a call to Redis may take, in ms. Default 500. */
  timeoutMs?: number;
  /** Largest entry kept, in bytes: a larger one is declined (`set` answers false). Default 1 MiB (1,048,576). */
  maxEntryBytes?: number;
}

/** How many keys one SCAN step asks for, and one UNLINK removes, while purging. */
const PURGE_BATCH = 500;

/**
 * A `ResponseCache` every instance shares through Redis: an answer one instance stored is a hit on
 * all. Each entry is one string key with its time to live (`SET … EX`), so Redis expires it and,
 * configured with an eviction policy (`allkeys-lru`), drops the oldest under memory pressure. An
 * entry over `maxEntryBytes` is declined: a large answer is simply not cached. Every call is
 * bounded by `timeoutMs`; a failed one throws `StoreUnavailableError`, which the cache turns into a miss.
 * @example modelsRouter({ catalog, providers, cache: { store: new RedisResponseCache({ client: await createRedisClient(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379') }) } })
 */
export class RedisResponseCache implements ResponseCache {
  readonly #client: Redis;
  readonly #keyPrefix: string;
  readonly #timeoutMs: number;
  readonly #maxEntryBytes: number;

  constructor(options: RedisResponseCacheOptions) {
    const { client, keyPrefix, timeoutMs } = resolveRedisLimiterOptions(
      { client: options.client, keyPrefix: options.keyPrefix, timeoutMs: options.timeoutMs, insurance: undefined },
      'kmg:cache',
    );
    const { maxEntryBytes = 1024 * 1024 } = options;
    if (!Number.isSafeInteger(maxEntryBytes) || maxEntryBytes <= 0)
      throw new TypeError('koa-model-gateway: RedisResponseCache maxEntryBytes must be a positive integer');
    this.#client = client;
    this.#keyPrefix = keyPrefix;
    this.#timeoutMs = timeoutMs;
    this.#maxEntryBytes = maxEntryBytes;
  }

  async get(account: string, key: string): Promise<string | undefined> {
    const entry = await answerWithin(this.#client.get(this.#accountKeys(account) + key), this.#timeoutMs);
    return entry ?? undefined;
  }

  async set(account: string, key: string, entry: string, ttlSeconds: number): Promise<boolean> {
    if (Buffer.byteLength(entry) > this.#maxEntryBytes) return false;
    await answerWithin(this.#client.set(this.#accountKeys(account) + key, entry, 'EX', ttlSeconds), this.#timeoutMs);
    return true;
  }

  async purge(account?: string): Promise<void> {
    // The prefix is the operator's; the account part is hex: only the prefix needs escaping.
    const pattern = `${escapeGlob(account === undefined ? `${this.#keyPrefix}:` : this.#accountKeys(account))}*`;
    let cursor = '0';
    do {
      const [next, keys] = await answerWithin(this.#client.scan(cursor, 'MATCH', pattern, 'COUNT', PURGE_BATCH), this.#timeoutMs);
      if (keys.length > 0) await answerWithin(this.#client.unlink(...keys), this.#timeoutMs);
      cursor = next;
    } while (cursor !== '0');
  }

  /**
   * The common start of an account's keys: its name hashed, so that any name (`*`, `:`, 255
   * characters) makes a short key that no other account's starts with.
   */
  #accountKeys(account: string): string {
    return `${this.#keyPrefix}:${createHash('sha256').update(account).digest('hex').slice(0, 32)}:`;
  }
}

const escapeGlob = (text: string) => text.replace(/[*?[\]\\]/g, '\\$&');
