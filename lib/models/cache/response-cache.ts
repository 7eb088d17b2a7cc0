/**
 * Where cached answers live: an exact-match store of entries by key, within an account. The
 * entry is opaque text (`cachedAnswer()` writes it), the key a hash (`cacheKey()`); the account is
 * told apart so that one account's entries can be purged. Implementations:
 * `MemoryResponseCache` (one process, bounded by entries and bytes), `RedisResponseCache`
 * (shared by every instance); `responseCacheContract()` in `koa-model-gateway/testing` checks
 * any other. A store may drop an entry whenever it likes (size, memory): a cache only ever
 * answers a miss for what it does not have. Semantic caching, when it comes, is another method
 * (a nearest entry by embedding) beside these, not a change to them.
 */
export interface ResponseCache {
  /** The entry stored under `key` in `account`, or undefined when there is none (never stored, expired, dropped, purged). */
  get(account: string, key: string): Promise<string | undefined>;
  /**
   * Stores `entry` under `key` in `account` for `ttlSeconds` (a positive integer), replacing any.
   * False when the store declines it (larger than it keeps one entry): the call is then simply not cached.
   */
  set(account: string, key: string, entry: string, ttlSeconds: number): Promise<boolean>;
  /** Removes every entry of `account`, or, without one, every entry. */
  purge(account?: string): Promise<void>;
}
