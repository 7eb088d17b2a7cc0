/** What a request's `Cache-Control` asks of the response cache. */
export interface CacheDirectives {
  /** `no-cache`: not answered from the cache (its answer may still be stored). */
  noCache: boolean;
  /** `no-store`: its answer is not stored (it may still be answered from the cache). */
  noStore: boolean;
  /** `max-age=N`: stored for N seconds, and answered only by an entry at most N seconds old. */
  maxAge?: number;
}

const MAX_AGE = /^max-age=(?:"(\d{1,10})"|(\d{1,10}))$/;

/**
 * The directives of a request's `Cache-Control` (RFC 9111 §5.2.1) that the cache heeds; others are
 * ignored, as a cache must. A `max-age` that is not a number of seconds is ignored too.
 */
export function cacheDirectives(header: string): CacheDirectives {
  const directives: CacheDirectives = { noCache: false, noStore: false };
  if (header === '') return directives;
  for (const raw of header.split(',')) {
    const directive = raw.trim().toLowerCase();
    if (directive === 'no-cache') directives.noCache = true;
    else if (directive === 'no-store') directives.noStore = true;
    else {
      const match = MAX_AGE.exec(directive);
      if (match) directives.maxAge = Number(match[1] ?? match[2]);
    }
  }
  return directives;
}
