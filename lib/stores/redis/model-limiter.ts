import type { Redis } from 'ioredis';
import { clockWindows, type ClockWindows } from '../../quota/clock-windows.js';
import { MemoryModelLimiter, type MemoryModelLimiterOptions } from '../memory/model-limiter.js';
import type { ModelLimiter } from '../../quota/model-limiter.js';
import {
  assertTokenCount,
  decide,
  hasRateLimits,
  hasTokenLimits,
  type ModelLimitDecision,
  type ModelLimits,
  type ModelUsage,
} from '../../quota/model-limits.js';
import { answerWithin, partyKey, RedisScript, resolveRedisLimiterOptions, type RedisLimiterOptions } from './redis-limiter.js';

export interface RedisModelLimiterOptions extends MemoryModelLimiterOptions, RedisLimiterOptions {}

// Counters outlive their window by this much, so that a process whose clock lags a little still
// finds the count.
const GRACE_MS = 60_000;

// One call decided and counted in one atomic step, by the rule of `decide` (model-limits.ts): the
// counters are read, and the request counted only when the minute has room and no token window is
// full. A refused call counts nothing. Answers the counters as they were before this call.
// KEYS[k+1..k+3]: requests this minute, tokens this minute, tokens today. ARGV[a+1..a+4]:
// requestsPerMinute, tokensPerMinute, tokensPerDay (0: no such limit), the minute key's lifetime
// (ms). A function, so that a call's reservation runs it in its own script (RedisSpendLedger).
export const CONSUME_LUA = `
local function consume(k, a)
  local requests = tonumber(redis.call('GET', KEYS[k + 1])) or 0
  local minuteTokens = tonumber(redis.call('GET', KEYS[k + 2])) or 0
  local dayTokens = tonumber(redis.call('GET', KEYS[k + 3])) or 0
  local rpm, tpm, tpd = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local full = (rpm > 0 and requests >= rpm) or (tpm > 0 and minuteTokens >= tpm) or (tpd > 0 and dayTokens >= tpd)
  if rpm > 0 and not full then
    redis.call('INCR', KEYS[k + 1])
    redis.call('PEXPIRE', KEYS[k + 1], ARGV[a + 4])
  end
  return {requests, minuteTokens, dayTokens}
end
`;
const CONSUME = new RedisScript(`${CONSUME_LUA}\nreturn consume(0, 0)`);

// KEYS: tokens this minute, tokens today. ARGV: tokens, the minute key's lifetime, the day key's (ms).
const ADD_TOKENS = new RedisScript(`
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('INCRBY', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
`);

type Keys = [requestsThisMinute: string, tokensThisMinute: string, tokensToday: string];

/** One call's consume as `CONSUME_LUA` runs it: its keys and arguments, and the decision its answer makes. */
export interface ConsumeStep {
  keys: Keys;
  args: number[];
  decide(counts: [requestsThisMinute: number, tokensThisMinute: number, tokensToday: number]): ModelLimitDecision;
}

/**
 * ModelLimiter shared by every process through Redis: requests per minute are exact across
 * processes (one Lua script reads and counts), per clock minute and UTC day (not rolling).
 *
 * Redis unreachable: fail closed by default (a 503 within `timeoutMs`), or `insurance: 'memory'`.
 * A consume that timed out may still run when Redis answers late: that request stays counted in
 * its minute (the safe direction). Tokens added while Redis is unreachable are lost (with
 * insurance, they count in the process's own memory). Use a Redis whose `maxmemory-policy` is
 * `noeviction`, so that no counter is evicted.
 * @example const limiter = new RedisModelLimiter({ client: await createRedisClient(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379') })
 */
export class RedisModelLimiter implements ModelLimiter {
  readonly #nowMs: () => number;
  readonly #client: Redis;
  readonly #keyPrefix: string;
  readonly #timeoutMs: number;
  readonly #insurance: MemoryModelLimiter | undefined;
  readonly #consume: (...args: Array<string | number>) => Promise<unknown>;
  readonly #addTokens: (...args: Array<string | number>) => Promise<unknown>;

  constructor(options: RedisModelLimiterOptions) {
    const { client, keyPrefix, insurance, timeoutMs, nowMs = Date.now } = options;
    const redis = resolveRedisLimiterOptions({ client, keyPrefix, insurance, timeoutMs }, 'kmg:models');
    if (typeof nowMs !== 'function') throw new TypeError('koa-model-gateway: nowMs must be a function');
    this.#nowMs = nowMs;
    this.#client = redis.client;
    this.#keyPrefix = redis.keyPrefix;
    this.#timeoutMs = redis.timeoutMs;
    this.#insurance = redis.insurance === 'memory' ? new MemoryModelLimiter({ nowMs }) : undefined;
    // The calls of one turn of the event loop go to Redis in one write: one system call, not one per request.
    this.#consume = CONSUME.batched(this.#client, 3);
    this.#addTokens = ADD_TOKENS.batched(this.#client, 2);
  }

  async consume(keyId: string, limits: ModelLimits): Promise<ModelLimitDecision> {
    const step = this.#step(keyId, limits);
    if (!('keys' in step)) return step;
    let counts: unknown;
    try {
      counts = await this.#answer(this.#consume(...step.keys, ...step.args));
    } catch (err) {
      if (this.#insurance) return this.#insurance.consume(keyId, limits);
      throw err;
    }
    return step.decide(counts as [number, number, number]);
  }

  /**
   * `consume`'s step, for a script of `client` that runs it beside other work (a call's
   * reservation: `RedisSpendLedger.reserveAndConsume`, one round trip for both); undefined when it
   * cannot run there: another client, or no rate limit (then `consume` needs no Redis). Without
   * the `insurance` of `consume`: the other work fails closed anyway.
   */
  consumeStep(client: Redis, keyId: string, limits: ModelLimits): ConsumeStep | undefined {
    if (client !== this.#client) return undefined;
    const step = this.#step(keyId, limits);
    return 'keys' in step ? step : undefined;
  }

  /** A consume's step, or the decision itself when there is nothing to count. */
  #step(keyId: string, limits: ModelLimits): ConsumeStep | ModelLimitDecision {
    const now = this.#nowMs();
    if (!hasRateLimits(limits)) return { allowed: true, at: now };
    const windows = clockWindows(now);
    const { requestsPerMinute = 0, tokensPerMinute = 0, tokensPerDay = 0 } = limits;
    const lifetime = Math.ceil(windows.minute.endsAt - now + GRACE_MS);
    return {
      keys: this.#keys(keyId, windows),
      args: [requestsPerMinute, tokensPerMinute, tokensPerDay, lifetime],
      decide: ([requestsThisMinute, tokensThisMinute, tokensToday]) => decide(limits, { requestsThisMinute, tokensThisMinute, tokensToday }, now),
    };
  }

  async addTokens(keyId: string, limits: ModelLimits, tokens: number): Promise<void> {
    assertTokenCount(tokens);
    if (!hasTokenLimits(limits) || tokens === 0) return;
    const now = this.#nowMs();
    const windows = clockWindows(now);
    const [, minuteKey, dayKey] = this.#keys(keyId, windows);
    const lifetimes = [windows.minute.endsAt, windows.day.endsAt].map((endsAt) => Math.ceil(endsAt - now + GRACE_MS));
    try {
      await this.#answer(this.#addTokens(minuteKey, dayKey, tokens, ...lifetimes));
    } catch (err) {
      if (this.#insurance) return this.#insurance.addTokens(keyId, limits, tokens);
      throw err;
    }
  }

  async usage(keyId: string): Promise<ModelUsage> {
    const counts = await this.#answer(this.#client.mget(...this.#keys(keyId, clockWindows(this.#nowMs()))));
    const [requestsThisMinute, tokensThisMinute, tokensToday] = counts.map((count) => Number(count ?? 0)) as [number, number, number];
    return { requestsThisMinute, tokensThisMinute, tokensToday };
  }

  #keys(keyId: string, windows: ClockWindows): Keys {
    const base = partyKey(this.#keyPrefix, keyId);
    return [`${base}:requests:${windows.minute.id}`, `${base}:tokens:${windows.minute.id}`, `${base}:tokens:${windows.day.id}`];
  }

  #answer<T>(call: Promise<T>): Promise<T> {
    return answerWithin(call, this.#timeoutMs);
  }
}
