import type { Redis } from 'ioredis';
import { cooldownLength, type CooldownPolicy, type CooldownStore } from '../../models/routing/cooldown-store.js';
import { answerWithin, batchedCall, partyKey, RedisScript, resolveRedisLimiterOptions } from './redis-limiter.js';

export interface RedisCooldownStoreOptions {
  /** An ioredis client made by `createRedisClient()` (`enableOfflineQueue: false`). */
  client: Redis;
  /** Prefix of every key the store writes. Default `kmg:cooldown`. */
  keyPrefix?: string;
  /** How long a call to Redis may take, in ms. Default 500. */
  timeoutMs?: number;
}

// One failure counted, and the cooldown begun, in one atomic step. KEYS: the deployment's recent
// failures (a sorted set of times), its cooldown (the time it ends, with that lifetime).
// ARGV: now, window, failures, cooldown (ms), a unique member for this failure.
// Answers the time the cooldown ends when this failure began it, else -1.
const FAIL = new RedisScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local now, window, failures, cooldown = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('PEXPIRE', KEYS[1], window)
if redis.call('ZCARD', KEYS[1]) < failures then return -1 end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], now + cooldown, 'PX', cooldown)
return now + cooldown
`);

let sequence = 0;

/**
 * A `CooldownStore` every instance shares through Redis: a deployment one instance saw failing is
 * skipped by all. Keys expire by themselves (a failure window, a cooldown); every call is bounded by
 * `timeoutMs`, and a failed one is a `StoreUnavailableError`, after which the handlers route as if
 * nothing cooled down. The times are the instances' own clocks: keep them in step (NTP).
 * @example modelsRouter({ catalog, providers, routing: { cooldown: { store: new RedisCooldownStore({ client: await createRedisClient(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379') }) } } })
 */
export class RedisCooldownStore implements CooldownStore {
  readonly #client: Redis;
  readonly #keyPrefix: string;
  readonly #timeoutMs: number;

  constructor(options: RedisCooldownStoreOptions) {
    const { client, keyPrefix, timeoutMs } = resolveRedisLimiterOptions(
      { client: options.client, keyPrefix: options.keyPrefix, timeoutMs: options.timeoutMs, insurance: undefined },
      'kmg:cooldown',
    );
    this.#client = client;
    this.#keyPrefix = keyPrefix;
    this.#timeoutMs = timeoutMs;
  }

  async fail(deployment: string, policy: CooldownPolicy, nowMs: number, retryAfterMs = 0): Promise<number | null> {
    const base = partyKey(this.#keyPrefix, deployment);
    const cooldown = cooldownLength(policy, retryAfterMs);
    const member = `${nowMs}:${process.pid}:${sequence++}`;
    const until = await answerWithin(
      FAIL.run(this.#client, 2, `${base}:failures`, `${base}:until`, nowMs, policy.windowMs, policy.failures, cooldown, member),
      this.#timeoutMs,
    );
    return Number(until) < 0 ? null : Number(until);
  }

  async coolingUntil(deployments: readonly string[], nowMs: number): Promise<Array<number | null>> {
    if (deployments.length === 0) return [];
    const keys = deployments.map((deployment) => `${partyKey(this.#keyPrefix, deployment)}:until`);
    // Batched: read in the same write as a call's admission, which the endpoint begins in the same turn.
    const read = batchedCall(this.#client, { send: (pipeline) => pipeline.mget(...keys), alone: async () => this.#client.mget(...keys) });
    const values = (await answerWithin(read, this.#timeoutMs)) as Array<string | null>;
    return values.map((value) => (value !== null && Number(value) > nowMs ? Number(value) : null));
  }
}
