import type { Redis } from 'ioredis';
import type { AlertClaims } from '../../cost/budget-alerts.js';
import { answerWithin } from './redis-limiter.js';

export interface RedisAlertClaimsOptions {
  /** An ioredis client created with `enableOfflineQueue: false`, as `createRedisClient()` makes one. */
  client: Redis;
  /** Prefix of every key written. Default `'kmg:alerts'`. */
  keyPrefix?: string;
  /** How long a call to Redis may take before it counts as unreachable, in ms. Default 500. */
  timeoutMs?: number;
}

/**
 * AlertClaims shared by every process through Redis: one `SET NX` per claim, expiring when the
 * claim does, so that a threshold is notified once per period however many processes cross it.
 * @example const claims = new RedisAlertClaims({ client: await createRedisClient(process.env.REDIS_URL) })
 */
export class RedisAlertClaims implements AlertClaims {
  readonly #client: Redis;
  readonly #keyPrefix: string;
  readonly #timeoutMs: number;

  constructor(options: RedisAlertClaimsOptions) {
    const { client, keyPrefix = 'kmg:alerts', timeoutMs = 500 } = options;
    if (typeof client?.set !== 'function') throw new TypeError('koa-model-gateway: client must be an ioredis client');
    if (typeof keyPrefix !== 'string' || keyPrefix === '') throw new TypeError('koa-model-gateway: keyPrefix must be a non-empty string');
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new TypeError('koa-model-gateway: timeoutMs must be a positive number');
    this.#client = client;
    this.#keyPrefix = keyPrefix;
    this.#timeoutMs = timeoutMs;
  }

  async claim(name: string, expiresAt: number): Promise<boolean> {
    const answer = await answerWithin(this.#client.call('SET', `${this.#keyPrefix}:${name}`, '1', 'PXAT', String(Math.ceil(expiresAt)), 'NX'), this.#timeoutMs);
    return answer === 'OK';
  }
}
