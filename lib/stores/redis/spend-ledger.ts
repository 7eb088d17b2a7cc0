import type { Redis } from 'ioredis';
import {
  assertCost,
  budgetPeriods,
  type BudgetPeriods,
  type PartyLimits,
  type PeriodSpend,
  type Reserved,
  type SpendLedger,
  type SpentBefore,
} from '../../cost/budgets.js';
import { randomAlphanumeric } from '../../random.js';
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
  /**
   * What a party spent in the UTC day and month of `at` before Redis counted it: asked when a
   * party's counter for the period is missing, when its spend is read or added to (a budget set on
   * a key or account that had spent already, a Redis that lost its data, even with calls under way,
   * REDIS_URL set mid-month), and written only if no other process wrote it first. `spendFromUsage(usageStore)` reads it from the usage records.
   * Default: nothing (0).
   */
  spentBefore?: SpentBefore | undefined;
}

// Counters outlive their period by this much, so that a process whose clock lags a little still finds the count.
const GRACE_MS = 86_400_000;

// KEYS: the party's day and month counters. ARGV: picodollars, the day's and the month's expiry (Unix ms), then
// either nothing (a missing counter starts from 0), 'counted' (nothing added unless both counters are there:
// 0), or the spend before, day and month (a missing counter starts from it; one another process wrote is kept).
const ADD = new RedisScript(`
if ARGV[4] == 'counted' then
  if redis.call('EXISTS', KEYS[1], KEYS[2]) < 2 then return 0 end
elseif ARGV[4] then
  redis.call('SET', KEYS[1], ARGV[4], 'NX')
  redis.call('SET', KEYS[2], ARGV[5], 'NX')
end
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
redis.call('INCRBY', KEYS[2], ARGV[1])
redis.call('PEXPIREAT', KEYS[2], ARGV[3])
return 1
`);

// KEYS: the party's day and month counters. ARGV: the spend before, day and month, and each one's expiry (Unix ms).
// A counter another process wrote or added to meanwhile is left as it is.
const SEED = new RedisScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then redis.call('PEXPIREAT', KEYS[1], ARGV[3]) end
if redis.call('SET', KEYS[2], ARGV[2], 'NX') then redis.call('PEXPIREAT', KEYS[2], ARGV[4]) end
return redis.call('MGET', KEYS[1], KEYS[2])
`);

// KEYS: the party's day and month counters, and its holds (a sorted set: member `<reservation>:<picodollars>`,
// score its expiry, Unix ms). ARGV: picodollars, now, the hold's expiry, the member, the day's and the month's
// limit ('' for none), then 'counted' (missing counters are reported: the spend before is to be read) or nothing.
// Holds that lapsed are dropped; the sums are Lua numbers (doubles): exact to 2^53 picodollars (9,007 USD).
const RESERVE = new RedisScript(`
if ARGV[7] == 'counted' and redis.call('EXISTS', KEYS[1], KEYS[2]) < 2 then return {-1} end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[2])
local held = 0
for _, member in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  held = held + tonumber(string.match(member, ':(%d+)$'))
end
local day = redis.call('GET', KEYS[1]) or '0'
local month = redis.call('GET', KEYS[2]) or '0'
local wanted = math.max(tonumber(ARGV[1]), 1)
local heldText = string.format('%.0f', held)
if (ARGV[5] ~= '' and tonumber(day) + held + wanted > tonumber(ARGV[5])) or (ARGV[6] ~= '' and tonumber(month) + held + wanted > tonumber(ARGV[6])) then
  return {0, day, month, heldText}
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
local latest = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[3], latest[2])
return {1, day, month, heldText}
`);

/**
 * SpendLedger shared by every process through Redis: one counter per party, day and month, in
 * picodollars (Redis integers: exact to 9.2 million USD per party and month), read as strings so
 * that no digit is lost. Reservations are held per party in a sorted set, checked and added by
 * one script (atomic across processes); each lapses at its expiry, so that the reservations of a
 * process that died are dropped by the next check after it. With `spentBefore`, a counter that is missing starts from what the usage
 * records hold. Redis unreachable: a 503 within `timeoutMs` (fail closed: no call passes
 * that the shared budgets have not seen). Use a Redis whose `maxmemory-policy` is `noeviction`.
 * @example const ledger = new RedisSpendLedger({ client: await createRedisClient(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379') })
 */
export class RedisSpendLedger implements SpendLedger {
  readonly #client: Redis;
  readonly #keyPrefix: string;
  readonly #timeoutMs: number;
  readonly #nowMs: () => number;
  readonly #add: (...args: Array<string | number>) => Promise<unknown>;
  readonly #spentBefore: SpentBefore | undefined;

  constructor(options: RedisSpendLedgerOptions) {
    const { client, keyPrefix = 'kmg:spend', timeoutMs = 500, nowMs = Date.now, spentBefore } = options;
    if (typeof client?.eval !== 'function') throw new TypeError('koa-model-gateway: client must be an ioredis client');
    if (typeof keyPrefix !== 'string' || keyPrefix === '') throw new TypeError('koa-model-gateway: keyPrefix must be a non-empty string');
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new TypeError('koa-model-gateway: timeoutMs must be a positive number');
    if (typeof nowMs !== 'function') throw new TypeError('koa-model-gateway: nowMs must be a function');
    if (spentBefore !== undefined && typeof spentBefore !== 'function') throw new TypeError('koa-model-gateway: spentBefore must be a function');
    this.#client = client;
    this.#keyPrefix = keyPrefix;
    this.#timeoutMs = timeoutMs;
    this.#nowMs = nowMs;
    this.#add = ADD.batched(client, 2);
    this.#spentBefore = spentBefore;
  }

  async spent(parties: readonly string[]): Promise<{ at: number; spend: PeriodSpend[]; held: bigint[] }> {
    const at = this.#nowMs();
    const periods = budgetPeriods(at);
    // One MGET per party: a party's keys share a hash slot, two parties' need not.
    const counts = await answerWithin(Promise.all(parties.map((party) => this.#client.mget(...this.#keys(party, periods)))), this.#timeoutMs);
    const spentBefore = this.#spentBefore;
    if (spentBefore !== undefined) {
      await Promise.all(
        counts.map(async (count, index) => {
          if (count[0] !== null && count[1] !== null) return;
          const party = parties[index] as string;
          const before = await spentBefore(party, at);
          const seeded = SEED.run(this.#client, 2, ...this.#keys(party, periods), String(before.day), String(before.month), ...this.#expiries(periods));
          counts[index] = (await answerWithin(seeded, this.#timeoutMs)) as Array<string | null>;
        }),
      );
    }
    const holds = await answerWithin(Promise.all(parties.map((party) => this.#client.zrangebyscore(this.#holdsKey(party), `(${at}`, '+inf'))), this.#timeoutMs);
    return {
      at,
      spend: counts.map(([day, month]) => ({ day: BigInt(day ?? 0), month: BigInt(month ?? 0) })),
      held: holds.map((members) => members.reduce((sum, member) => sum + BigInt(member.slice(member.lastIndexOf(':') + 1)), 0n)),
    };
  }

  async reserve(limits: readonly PartyLimits[], picoUsd: number, ttlMs: number): Promise<Reserved> {
    assertCost(picoUsd);
    const at = this.#nowMs();
    const periods = budgetPeriods(at);
    const reservation = `${randomAlphanumeric(16)}:${picoUsd}`;
    const spend = limits.map(() => ({ day: 0n, month: 0n }));
    // One party at a time (two parties' keys need not share a hash slot); a refusal releases what was held before it.
    for (const [index, { party, day, month }] of limits.entries()) {
      const args = [...this.#keys(party, periods), this.#holdsKey(party), picoUsd, at, at + ttlMs, reservation, day?.toString() ?? '', month?.toString() ?? ''];
      let answer = (await answerWithin(RESERVE.run(this.#client, 3, ...args, this.#spentBefore === undefined ? '' : 'counted'), this.#timeoutMs)) as [
        number,
        string,
        string,
        string,
      ];
      if (answer[0] === -1) {
        await this.spent([party]);
        answer = (await answerWithin(RESERVE.run(this.#client, 3, ...args, ''), this.#timeoutMs)) as [number, string, string, string];
      }
      const held = BigInt(answer[3]);
      spend[index] = { day: BigInt(answer[1]) + held, month: BigInt(answer[2]) + held };
      if (answer[0] === 0) {
        await this.release(
          limits.slice(0, index).map((limit) => limit.party),
          reservation,
        );
        return { at, spend };
      }
    }
    return { at, spend, reservation };
  }

  async release(parties: readonly string[], reservation: string): Promise<void> {
    if (parties.length === 0) return;
    await answerWithin(Promise.all(parties.map((party) => this.#client.zrem(this.#holdsKey(party), reservation))), this.#timeoutMs);
  }

  #holdsKey(party: string): string {
    return `${partyKey(this.#keyPrefix, party)}:held`;
  }

  async add(parties: readonly string[], picoUsd: number): Promise<void> {
    assertCost(picoUsd);
    if (picoUsd === 0) return;
    const at = this.#nowMs();
    const periods = budgetPeriods(at);
    const expiries = this.#expiries(periods);
    const spentBefore = this.#spentBefore;
    // With the spend before known, a counter missing here (Redis lost its data while the call was
    // under way) starts from the usage records, not from this one call: else the next check finds it
    // and never reads them. Should the records hold this call already, it counts twice: over, never under.
    const onlyCounted = spentBefore === undefined ? [] : ['counted'];
    const added = await answerWithin(
      Promise.all(parties.map((party) => this.#add(...this.#keys(party, periods), picoUsd, ...expiries, ...onlyCounted))),
      this.#timeoutMs,
    );
    if (spentBefore === undefined) return;
    await Promise.all(
      added.map(async (answer, index) => {
        if (answer !== 0) return;
        const party = parties[index] as string;
        const before = await spentBefore(party, at);
        await answerWithin(
          ADD.run(this.#client, 2, ...this.#keys(party, periods), picoUsd, ...expiries, String(before.day), String(before.month)),
          this.#timeoutMs,
        );
      }),
    );
  }

  #expiries(periods: BudgetPeriods): [day: number, month: number] {
    return [periods.day.endsAt + GRACE_MS, periods.month.endsAt + GRACE_MS];
  }

  #keys(party: string, periods: BudgetPeriods): [day: string, month: string] {
    const base = partyKey(this.#keyPrefix, party);
    return [`${base}:day:${periods.day.id}`, `${base}:month:${periods.month.id}`];
  }
}
