import type { KeyChanges } from './key-changes.js';
import type { ApiKeyRecord, KeyStore, NewApiKey } from './key-store.js';

export interface CachedKeyStoreOptions {
  /**
   * How long an answer of `findByHash` is reused, in milliseconds; also the longest a revocation
   * made outside this wrapper (the CLI, another process) can go unnoticed when `changes` does not
   * tell of it. Default: 5000.
   */
  ttlMs?: number;
  /**
   * Where other processes announce revocations and changes (see `announceKeyChanges`): a key
   * announced there is forgotten at once. Default: none, only `ttlMs` bounds the delay.
   */
  changes?: KeyChanges;
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
  ...(record.cache && { cache: { ...record.cache } }),
});

/**
 * A `KeyStore` that remembers the answers of `findByHash`, found and not found, per hash for
 * `ttlMs`, so that a request does not read the database for a key it read a moment ago.
 * `create`, `get`, `list`, `revoke`, `update`, `rotate` and `touch` go to the wrapped store; `revoke`,
 * `update` and `rotate` through the wrapper forget the key at once, and `create` and `rotate`
 * forget a remembered "not found" for the new key's hash.
 *
 * Revocation delay: a key revoked elsewhere (the `keys revoke` command, another server process,
 * the database directly) is still accepted by this process for up to `ttlMs`, unless `changes`
 * tells of it sooner. Expiry stays exact: `apiKey()` checks `expiresAt` and `revokedAt` on the
 * record at every request.
 * @example app.use(apiKey({ store: cachedKeyStore(new KnexKeyStore(knex), { ttlMs: 5000, changes }) }))
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
  // Bumped by every create, revoke and change: a lookup that started before one is not
  // remembered, so it cannot bring back the answer the change just forgot.
  let generation = 0;

  function forget(id?: string): void {
    generation += 1;
    if (id === undefined) return entries.clear();
    for (const [hash, entry] of entries) {
      if (entry.record?.id === id) entries.delete(hash);
    }
  }
  options.changes?.subscribe(forget);

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
    get: (id) => store.get(id),
    list: (filter) => store.list(filter),
    // A use changes nothing a request decides by: nothing to forget.
    touch: (ids, atSeconds) => store.touch(ids, atSeconds),
    // Forgotten even when the store rejects: the change may have been made (and only its
    // announcement failed).
    async revoke(id) {
      try {
        return await store.revoke(id);
      } finally {
        forget(id);
      }
    },
    async update(id, update) {
      try {
        return await store.update(id, update);
      } finally {
        forget(id);
      }
    },
    async rotate(id, rotation) {
      try {
        return await store.rotate(id, rotation);
      } finally {
        forget(id);
        entries.delete(rotation.hash);
      }
    },
  };
}
