import type { Redis } from 'ioredis';
import type { KeyChanges } from '../../auth/key-changes.js';
import { DEFAULT_REDIS_TIMEOUT_MS, answerWithin } from './redis-limiter.js';

export interface RedisKeyChangesOptions {
  /** The client to publish with, as `createRedisClient()` makes one; subscribing uses a duplicate of it. */
  client: Redis;
  /** The pub/sub channel. Default `'kmg:key-changes'`. */
  channel?: string;
  /**
   * How long `publish` may wait for Redis, in ms, as the limiters' `timeoutMs`: past it, it
   * rejects with a `StoreUnavailableError`, and the change reaches the other processes when their
   * cache of the key expires. Default 500.
   */
  timeoutMs?: number;
}

/**
 * KeyChanges on Redis pub/sub: `publish` sends the key's id on `channel`, and the first
 * `subscribe` opens a second connection (`client.duplicate()`) that listens there. Pub/sub keeps
 * nothing for a connection that is away, so each time that connection is ready again (after
 * its re-subscription is confirmed), the listeners are told without an id: anything may have
 * changed meanwhile. `close()` closes that connection.
 *
 * Errors of the listening connection are not reported here: the client it duplicates reports
 * the same outage.
 * @example const changes = new RedisKeyChanges({ client: await createRedisClient(url) })
 */
export class RedisKeyChanges implements KeyChanges {
  readonly #client: Redis;
  readonly #channel: string;
  readonly #timeoutMs: number;
  readonly #listeners = new Set<(id?: string) => void>();
  #subscriber: Redis | undefined;
  /** True while the listening connection is subscribed. */
  #live = false;

  constructor(options: RedisKeyChangesOptions) {
    if (typeof options?.client?.publish !== 'function') throw new TypeError('koa-model-gateway: RedisKeyChanges needs an ioredis client');
    this.#client = options.client;
    this.#channel = options.channel ?? 'kmg:key-changes';
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
    if (!Number.isFinite(this.#timeoutMs) || this.#timeoutMs <= 0)
      throw new TypeError('koa-model-gateway: RedisKeyChanges timeoutMs must be a positive number');
  }

  async publish(id: string): Promise<void> {
    await answerWithin(this.#client.publish(this.#channel, id), this.#timeoutMs);
  }

  subscribe(listener: (id?: string) => void): () => void {
    const own = (id?: string) => listener(id);
    this.#listeners.add(own);
    if (this.#subscriber === undefined) this.#subscriber = this.#listen();
    else if (this.#live) {
      // Already listening: this listener's first call is now, not at the next `ready`.
      queueMicrotask(() => {
        if (this.#listeners.has(own)) own();
      });
    }
    return () => {
      this.#listeners.delete(own);
      if (this.#listeners.size === 0) void this.close();
    };
  }

  /** Closes the listening connection; the listeners hear nothing more. */
  async close(): Promise<void> {
    const subscriber = this.#subscriber;
    this.#subscriber = undefined;
    this.#live = false;
    this.#listeners.clear();
    await subscriber?.quit().catch(() => subscriber.disconnect());
  }

  #notify(id?: string): void {
    for (const listener of this.#listeners) listener(id);
  }

  #listen(): Redis {
    // Subscribed by hand at each `ready`, not by ioredis' automatic re-subscription, which runs
    // after `ready` is emitted: the listeners hear "anything may have changed" only once
    // messages flow again, so nothing falls between.
    const subscriber = this.#client.duplicate({ autoResubscribe: false });
    subscriber.on('error', () => undefined);
    subscriber.on('message', (channel: string, id: string) => {
      if (channel === this.#channel) this.#notify(id);
    });
    subscriber.on('close', () => {
      this.#live = false;
    });
    subscriber.on('ready', () => {
      subscriber.subscribe(this.#channel).then(
        () => {
          if (subscriber !== this.#subscriber) return;
          this.#live = true;
          this.#notify();
        },
        () => subscriber.disconnect(true), // reconnect, and try again at the next `ready`
      );
    });
    return subscriber;
  }
}
