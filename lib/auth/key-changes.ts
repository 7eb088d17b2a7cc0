import type { KeyStore } from './key-store.js';

/**
 * How the processes that share a KeyStore tell each other that a key was revoked or changed, so
 * that each `cachedKeyStore` forgets it at once rather than after its ttl. Implementations:
 * `MemoryKeyChanges` (one process), `KnexKeyChanges` (polls a version row in the database),
 * `RedisKeyChanges` (pub/sub).
 */
export interface KeyChanges {
  /** Tells every subscriber, in every process, that the key `id` changed. */
  publish(id: string): Promise<void>;
  /**
   * Calls `listener` with the id of each changed key, or with no id when changes may have been
   * missed or the feed does not carry ids: then anything may have changed. Once listening has
   * begun, `listener` is called without an id, since nothing says what changed before.
   * Returns a function that stops the calls.
   */
  subscribe(listener: (id?: string) => void): () => void;
}

/**
 * A KeyStore that announces on `changes` every revocation and update it makes, after the wrapped
 * store has made it: what the admin API and the CLI write through, so that every server
 * process's key cache hears of it. A failed announcement rejects; the change itself is made.
 * @example const keys = announceKeyChanges(new KnexKeyStore(knex), new KnexKeyChanges(knex))
 */
export function announceKeyChanges(store: KeyStore, changes: KeyChanges): KeyStore {
  if (typeof store?.findByHash !== 'function') throw new TypeError('koa-model-gateway: announceKeyChanges() needs a KeyStore');
  if (typeof changes?.publish !== 'function') throw new TypeError('koa-model-gateway: announceKeyChanges() needs KeyChanges');
  return {
    findByHash: (hash) => store.findByHash(hash),
    get: (id) => store.get(id),
    create: (key) => store.create(key),
    list: (filter) => store.list(filter),
    async revoke(id) {
      const revoked = await store.revoke(id);
      if (revoked) await changes.publish(id);
      return revoked;
    },
    async update(id, update) {
      const updated = await store.update(id, update);
      if (updated) await changes.publish(id);
      return updated;
    },
  };
}
