import type { Redis } from 'ioredis';
import { assertCost, budgetPeriods, type BudgetPeriods, type PeriodSpend, type SpendLedger } from '../../cost/budgets.js';
import { answerWithin, partyKey, RedisScript } from './redis-limiter.js';

export interface RedisSpendLedgerOptions {
  /** An ioredis client created with `enableOfflineQueue: false`, as `createRedisClient()` makes one. */
  client: Redis;
  /** Prefix of every key the ledger writes. Default `'kmg:spend'`. */
  keyPrefix?: string;
  /** How long a call to Redis may take before it counts as unreachable (503), in ms. Default 500. */
  timeoutMs?: number;
  /** The clock, in Unix ms, that places spend in its day and month. Default `Date.now`. */
  nowMs?: () => number;
}

// Counters outlive their period by this much, so that a process whose clock lags a little still finds the count.
const GRACE_MS = 86_400_000;

// KEYS: the party's day and month counters. ARGV: picodollars, the day's and the month's expiry (Unix ms).
const ADD = new RedisScript(`
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
redis.call('INCRBY', KEYS[2], ARGV[1])
redis.call('PEXPIREAT', KEYS[2], ARGV[3])
return 1
`);

/**
 * SpendLedger shared by every process through Redis: one counter per party, day and month, in
 * picodollars (Redis integers: exact to 9.2 million USD per party and month), read as strings so
 * that no digit is lost. Redis unreachable: a 503 within `timeoutMs` (fail closed: no call passes
 * that the shared budgets have not seen). Use a Redis whose `maxmemory-policy` is `noeviction`.
 * @example const ledger = new RedisSpendLedger({ client: await createRedisClient(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379') })
 */
export class RedisSpendLedger implements SpendLedger {
  readonly #client: Redis;
  readonly #keyPrefix: string;
  readonly #timeoutMs: number;
  readonly #nowMs: () => number;
  readonly #add: (...args: Array<string | number>) => Promise<unknown>;

  constructor(options: RedisSpendLedgerOptions) {
    const { client, keyPrefix = 'kmg:spend', timeoutMs = 500, nowMs = Date.now } = options;
    if (typeof client?.eval !== 'function') throw new TypeError('koa-model-gateway: client must be an ioredis client');
    if (typeof keyPrefix !== 'string' || keyPrefix === '') throw new TypeError('koa-model-gateway: keyPrefix must be a non-empty string');
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new TypeError('koa-model-gateway: timeoutMs must be a positive number');
    if (typeof nowMs !== 'function') throw new TypeError('koa-model-gateway: nowMs must be a function');
    this.#client = client;
    this.#keyPrefix = keyPrefix;
    this.#timeoutMs = timeoutMs;
    this.#nowMs = nowMs;
    this.#add = ADD.batched(client, 2);
  }

  async spent(parties: readonly string[]): Promise<{ at: number; spend: PeriodSpend[] }> {
    const at = this.#nowMs();
    const periods = budgetPeriods(at);
    // One MGET per party: a party's keys share a hash slot, two parties' need not.
    const counts = await answerWithin(Promise.all(parties.map((party) => this.#client.mget(...this.#keys(party, periods)))), this.#timeoutMs);
    return { at, spend: counts.map(([day, month]) => ({ day: BigInt(day ?? 0), month: BigInt(month ?? 0) })) };
  }

  async add(parties: readonly string[], picoUsd: number): Promise<void> {
    assertCost(picoUsd);
    if (picoUsd === 0) return;
    const periods = budgetPeriods(this.#nowMs());
    const expiries = [periods.day.endsAt + GRACE_MS, periods.month.endsAt + GRACE_MS];
    await answerWithin(Promise.all(parties.map((party) => this.#add(...this.#keys(party, periods), picoUsd, ...expiries))), this.#timeoutMs);
  }

  #keys(party: string, periods: BudgetPeriods): [day: string, month: string] {
    const base = partyKey(this.#keyPrefix, party);
    return [`${base}:day:${periods.day.id}`, `${base}:month:${periods.month.id}`];
  }
}
