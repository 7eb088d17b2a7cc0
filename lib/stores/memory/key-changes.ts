import type { KeyChanges } from '../../auth/key-changes.js';

/**
 * KeyChanges within one process: for tests, and for several caches over one store.
 * @example const changes = new MemoryKeyChanges(); cachedKeyStore(announceKeyChanges(store, changes), { changes })
 */
export class MemoryKeyChanges implements KeyChanges {
  readonly #listeners = new Set<(id?: string) => void>();

  async publish(id: string): Promise<void> {
    for (const listener of this.#listeners) listener(id);
  }

  subscribe(listener: (id?: string) => void): () => void {
    // A wrapper of its own, so that one listener subscribed twice is called twice and unsubscribed once.
    const own = (id?: string) => listener(id);
    this.#listeners.add(own);
    queueMicrotask(() => {
      if (this.#listeners.has(own)) own();
    });
    return () => this.#listeners.delete(own);
  }
}
