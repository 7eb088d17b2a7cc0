import type { ApiKeyRecord, KeyStore, NewApiKey } from './key-store.js';

export interface CachedKeyStoreOptions {
  /**
   * How long an answer of `findByHash` is reused, in milliseconds; also the longest a revocation
   * made outside this wrapper (the CLI, another process) can go unnoticed. Default: 5000.
   */
  ttlMs?: number;
  /** How many hashes are remembered at most; the oldest entry goes first. Default: 10,000. */
  maxEntries?: number;
  /** The clock, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
}

interface Entry {
  record: ApiKeyRecord | undefined;
  expiresAt: number;
}

const copy = (record: ApiKeyRecord): ApiKeyRecord => ({
  ...record,
  scopes: [...record.scopes],
  models: record.models === null ? null : [...record.models],
  ...(record.limits && { limits: { ...record.limits } }),
});

/**
 * A `KeyStore` that remembers the answers of `findByHash`, found and not found, per hash for
 * `ttlMs`, so that a request does not read the database for a key it read a moment ago.
 * `create`, `list` and `revoke` go to the wrapped store; `revoke` through the wrapper forgets
 * the key at once, and `create` forgets a remembered "not found" for its hash.
 *
 * Revocation delay: a key revoked elsewhere (the `keys revoke` command, another server process,
 * the database directly) is still accepted by this process for up to `ttlMs`. Expiry stays exact:
 * `apiKey()` checks `expiresAt` and `revokedAt` on the record at every request.
 * @example app.use(apiKey({ store: cachedKeyStore(new KnexKeyStore(knex), { ttlMs: 5000 }) }))
 */
export function cachedKeyStore(store: KeyStore, options: CachedKeyStoreOptions = {}): KeyStore {
  if (typeof store?.findByHash !== 'function') throw new TypeError('koa-model-gateway: cachedKeyStore() needs a KeyStore');
  const { ttlMs = 5000, maxEntries = 10_000, nowMs = Date.now } = options;
  if (!Number.isFinite(ttlMs) || ttlMs < 0) throw new TypeError('koa-model-gateway: cachedKeyStore() ttlMs must be a non-negative number');
  if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) {
    throw new TypeError('koa-model-gateway: cachedKeyStore() maxEntries must be a positive integer');
  }
  // Insertion order is age order: every entry is (re)inserted when it is read from the store.
  const entries = new Map<string, Entry>();
  // Bumped by every create and revoke: a lookup that started before one is not remembered,
  // so it cannot bring back the answer the change just forgot.
  let generation = 0;

  function remember(hash: string, record: ApiKeyRecord | undefined): void {
    entries.delete(hash);
    if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
    entries.set(hash, { record, expiresAt: nowMs() + ttlMs });
  }

  return {
    async findByHash(hash) {
      const entry = entries.get(hash);
      if (entry !== undefined && nowMs() < entry.expiresAt) return entry.record && copy(entry.record);
      const started = generation;
      const record = await store.findByHash(hash);
      if (started === generation) remember(hash, record && copy(record));
      return record;
    },
    async create(key: NewApiKey) {
      const created = await store.create(key);
      generation += 1;
      entries.delete(key.hash);
      return created;
    },
    list: (filter) => store.list(filter),
    async revoke(id) {
      const revoked = await store.revoke(id);
      generation += 1;
      for (const [hash, entry] of entries) {
        if (entry.record?.id === id) entries.delete(hash);
      }
      return revoked;
    },
  };
}
