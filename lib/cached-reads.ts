export interface CachedReadsOptions {
  /** How long a value is reused, in ms: a change reaches every process within it. Default 1,000. */
  ttlMs?: number;
  /** Default `Date.now`. */
  nowMs?: () => number;
}

/**
 * `read` through a cache of `ttlMs` per name, so that a request does not wait on the database for
 * a setting: a change made in any process takes effect everywhere within `ttlMs`. Reads of one name
 * made while one is under way share it; a failed read is not kept.
 * @example const budgetOf = cachedReads((account) => store.get(account), { ttlMs: 1000 }, 'cachedAccountBudgets()')
 */
export function cachedReads<T>(read: (name: string) => Promise<T>, options: CachedReadsOptions, where: string): (name: string) => Promise<T> {
  const { ttlMs = 1000, nowMs = Date.now } = options;
  if (!Number.isFinite(ttlMs) || ttlMs < 0) throw new TypeError(`koa-model-gateway: ${where} ttlMs must be a non-negative number`);
  const cache = new Map<string, { until: number; value: Promise<T> }>();
  return (name) => {
    const now = nowMs();
    const cached = cache.get(name);
    if (cached !== undefined && cached.until > now) return cached.value;
    // Entries past their time are dropped as they are read again; a sweep keeps the map to the names in use.
    if (cache.size > 10_000) for (const [other, entry] of cache) if (entry.until <= now) cache.delete(other);
    const value = read(name);
    cache.set(name, { until: now + ttlMs, value });
    value.catch(() => cache.delete(name));
    return value;
  };
}
