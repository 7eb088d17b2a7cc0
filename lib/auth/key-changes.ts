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

export interface AnnounceKeyChangesOptions {
  /**
   * Called when a change was made but could not be announced (the feed failed or did not answer
   * in time), with the error and the key's id; the call then resolves with its result, and the
   * other processes notice the change when their cache of the key expires. Default: none, the
   * call rejects with the error (the change itself is made all the same).
   */
  onError?: (err: unknown, id: string) => void;
}

/**
 * A KeyStore that announces on `changes` every revocation, update and rotation it makes, after
 * the wrapped store has made it: what the admin API and the CLI write through, so that every
 * server process's key cache hears of it. A failed announcement goes to `onError`, or rejects
 * without it; the change itself is made either way.
 * @example const keys = announceKeyChanges(new KnexKeyStore(knex), new KnexKeyChanges(knex), { onError: (err, id) => log.warn({ err, id }) })
 */
export function announceKeyChanges(store: KeyStore, changes: KeyChanges, options: AnnounceKeyChangesOptions = {}): KeyStore {
  if (typeof store?.findByHash !== 'function') throw new TypeError('koa-model-gateway: announceKeyChanges() needs a KeyStore');
  if (typeof changes?.publish !== 'function') throw new TypeError('koa-model-gateway: announceKeyChanges() needs KeyChanges');
  const { onError } = options;
  if (onError !== undefined && typeof onError !== 'function') throw new TypeError('koa-model-gateway: announceKeyChanges() onError must be a function');
  async function announce(id: string): Promise<void> {
    if (onError === undefined) return changes.publish(id);
    try {
      await changes.publish(id);
    } catch (err) {
      onError(err, id);
    }
  }
  return {
    findByHash: (hash) => store.findByHash(hash),
    get: (id) => store.get(id),
    create: (key) => store.create(key),
    list: (filter) => store.list(filter),
    touch: (ids, atSeconds) => store.touch(ids, atSeconds),
    async revoke(id) {
      const revocation = await store.revoke(id);
      if (revocation === 'revoked') await announce(id);
      return revocation;
    },
    async update(id, update) {
      const updated = await store.update(id, update);
      if (updated) await announce(id);
      return updated;
    },
    async rotate(id, rotation) {
      const result = await store.rotate(id, rotation);
      if (result.outcome === 'rotated') await announce(id);
      return result;
    },
  };
}
