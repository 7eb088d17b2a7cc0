import type { Redis } from 'ioredis';
import type { ModelLimitDecision } from '../../quota/model-limits.js';
import {
  assertCost,
  budgetPeriods,
  type BudgetPeriods,
  type PartyLimits,
  type PeriodSpend,
  type RequestConsume,
  type Reserved,
  type SpendLedger,
  type SpentBefore,
} from '../../cost/budgets.js';
import { randomAlphanumeric } from '../../random.js';
import { CONSUME_LUA, RedisModelLimiter, type ConsumeStep } from './model-limiter.js';
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

// A call's cost counted, then its hold ended, in one step. KEYS: the party's day and month counters, its holds.
// ARGV: picodollars, the day's and the month's expiry (Unix ms), the hold's member, then 'counted' (nothing done
// unless both counters are there: 0) or nothing.
const SETTLE = new RedisScript(`
if ARGV[5] == 'counted' and redis.call('EXISTS', KEYS[1], KEYS[2]) < 2 then return 0 end
if ARGV[1] ~= '0' then
  redis.call('INCRBY', KEYS[1], ARGV[1])
  redis.call('PEXPIREAT', KEYS[1], ARGV[2])
  redis.call('INCRBY', KEYS[2], ARGV[1])
  redis.call('PEXPIREAT', KEYS[2], ARGV[3])
end
redis.call('ZREM', KEYS[3], ARGV[4])
return 1
`);

// KEYS: the party's day and month counters. ARGV: the spend before, day and month, and each one's expiry (Unix ms).
// A counter another process wrote or added to meanwhile is left as it is.
const SEED = new RedisScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then redis.call('PEXPIREAT', KEYS[1], ARGV[3]) end
if redis.call('SET', KEYS[2], ARGV[2], 'NX') then redis.call('PEXPIREAT', KEYS[2], ARGV[4]) end
return redis.call('MGET', KEYS[1], KEYS[2])
`);

// One party's reservation. KEYS[k+1..k+3]: the party's day and month counters, and its holds (a
// sorted set: member `<reservation>:<picodollars>`, score its expiry, Unix ms). ARGV[1..4]:
// picodollars, now, the hold's expiry, the member; `dayLimit`, `monthLimit`: the party's ('' for
// none). Holds that lapsed are dropped; the sums are Lua numbers (doubles): exact to 2^53
// picodollars (9,007 USD). Answers {1 held or 0 refused, the day's spend, the month's, the holds before}.
const RESERVE_LUA = `
local function reserve(k, dayLimit, monthLimit)
  redis.call('ZREMRANGEBYSCORE', KEYS[k + 3], '-inf', ARGV[2])
  local held = 0
  for _, member in ipairs(redis.call('ZRANGE', KEYS[k + 3], 0, -1)) do
    held = held + tonumber(string.match(member, ':(%d+)$'))
  end
  local day = redis.call('GET', KEYS[k + 1]) or '0'
  local month = redis.call('GET', KEYS[k + 2]) or '0'
  local wanted = math.max(tonumber(ARGV[1]), 1)
  local heldText = string.format('%.0f', held)
  if (dayLimit ~= '' and tonumber(day) + held + wanted > tonumber(dayLimit)) or (monthLimit ~= '' and tonumber(month) + held + wanted > tonumber(monthLimit)) then
    return {0, day, month, heldText}
  end
  redis.call('ZADD', KEYS[k + 3], ARGV[3], ARGV[4])
  local latest = redis.call('ZRANGE', KEYS[k + 3], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[k + 3], latest[2])
  return {1, day, month, heldText}
end
`;

// One party's reservation, on a Redis Cluster's client. KEYS: the party's day and month counters, and its holds. ARGV: picodollars, now, the hold's expiry, the member, the day's and the month's
// limit ('' for none), then 'counted' (missing counters are reported: the spend before is to be read) or nothing.
const RESERVE = new RedisScript(`${RESERVE_LUA}
if ARGV[7] == 'counted' and redis.call('EXISTS', KEYS[1], KEYS[2]) < 2 then return {-1} end
return reserve(0, ARGV[5], ARGV[6])
`);

// A call's admission: each party's reservation in order, then, once all hold, its request counted
// (CONSUME_LUA) when its keys are given; a party that refuses ends the holds made before it, and
// nothing is counted. KEYS: each party's three (as RESERVE's), then the consume's three, if any. ARGV: picodollars, now, the
// hold's expiry, the member, 'counted' or '' (as RESERVE's: a missing counter of any party answers
// {-1}), the number of parties, each one's day and month limit, then the consume's four.
// Answers {1 or 0, each party's day, month and holds up to the one that refused, then, when 1, the consume's three counts}.
const ADMIT = new RedisScript(`${RESERVE_LUA}${CONSUME_LUA}
local parties = tonumber(ARGV[6])
if ARGV[5] == 'counted' then
  for p = 0, parties - 1 do
    if redis.call('EXISTS', KEYS[p * 3 + 1], KEYS[p * 3 + 2]) < 2 then return {-1} end
  end
end
local answer = {1}
for p = 0, parties - 1 do
  local reserved = reserve(p * 3, ARGV[7 + p * 2], ARGV[8 + p * 2])
  table.insert(answer, reserved[2])
  table.insert(answer, reserved[3])
  table.insert(answer, reserved[4])
  if reserved[1] == 0 then
    for q = 0, p - 1 do redis.call('ZREM', KEYS[q * 3 + 3], ARGV[4]) end
    answer[1] = 0
    return answer
  end
end
if #KEYS > parties * 3 then
  for _, count in ipairs(consume(parties * 3, 6 + parties * 2)) do table.insert(answer, count) end
end
return answer
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
  readonly #settle: (...args: Array<string | number>) => Promise<unknown>;
  readonly #spentBefore: SpentBefore | undefined;
  // ADMIT by its number of keys: the calls of one turn of the event loop go to Redis in one write.
  readonly #admits = new Map<number, (...args: Array<string | number>) => Promise<unknown>>();

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
    this.#settle = SETTLE.batched(client, 3);
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

  /** Every party's check and hold in one script (one round trip); on a Redis Cluster's client, one party at a time. */
  async reserve(limits: readonly PartyLimits[], picoUsd: number, ttlMs: number): Promise<Reserved> {
    return this.#client.isCluster === true ? this.#reserveEach(limits, picoUsd, ttlMs) : this.#reserveAll(limits, picoUsd, ttlMs, undefined);
  }

  /**
   * `reserve` and, once every party's hold is made, the request counted, in one script (one round
   * trip), when `consume.limiter` is a `RedisModelLimiter` on this ledger's client; else `reserve`
   * alone. On a Redis Cluster's client, `reserve` alone: two parties' keys need not share a node.
   */
  async reserveAndConsume(
    limits: readonly PartyLimits[],
    picoUsd: number,
    ttlMs: number,
    consume: RequestConsume,
  ): Promise<Reserved & { decision?: ModelLimitDecision }> {
    if (this.#client.isCluster === true) return this.#reserveEach(limits, picoUsd, ttlMs);
    const step = consume.limiter instanceof RedisModelLimiter ? consume.limiter.consumeStep(this.#client, consume.keyId, consume.limits) : undefined;
    return this.#reserveAll(limits, picoUsd, ttlMs, step);
  }

  /** ADMIT: every party's hold and, with `step`, the request counted. */
  async #reserveAll(
    limits: readonly PartyLimits[],
    picoUsd: number,
    ttlMs: number,
    step: ConsumeStep | undefined,
  ): Promise<Reserved & { decision?: ModelLimitDecision }> {
    assertCost(picoUsd);
    const at = this.#nowMs();
    const periods = budgetPeriods(at);
    const reservation = `${randomAlphanumeric(16)}:${picoUsd}`;
    const keys = [...limits.flatMap(({ party }) => [...this.#keys(party, periods), this.#holdsKey(party)]), ...(step?.keys ?? [])];
    const bounds = limits.flatMap(({ day, month }) => [day?.toString() ?? '', month?.toString() ?? '']);
    const admit = async (counted: string) => {
      const args = [picoUsd, at, at + ttlMs, reservation, counted, limits.length, ...bounds, ...(step?.args ?? [])];
      return (await answerWithin(this.#admit(keys.length)(...keys, ...args), this.#timeoutMs)) as Array<number | string>;
    };
    let answer = await admit(this.#spentBefore === undefined ? '' : 'counted');
    if (answer[0] === -1) {
      // A party's counter is missing: started from the usage records, then admitted again.
      await this.spent(limits.map(({ party }) => party));
      answer = await admit('');
    }
    const spend = limits.map(() => ({ day: 0n, month: 0n }));
    for (let index = 0; index < limits.length && 3 + index * 3 < answer.length; index += 1) {
      const [day, month, held] = answer.slice(1 + index * 3, 4 + index * 3).map((value) => BigInt(value)) as [bigint, bigint, bigint];
      spend[index] = { day: day + held, month: month + held };
    }
    if (answer[0] !== 1) return { at, spend };
    if (step === undefined) return { at, spend, reservation };
    const counts = answer.slice(1 + limits.length * 3).map(Number) as [number, number, number];
    return { at, spend, reservation, decision: step.decide(counts) };
  }

  /** One party at a time, each its own script; a refusal releases what was held before it. */
  async #reserveEach(limits: readonly PartyLimits[], picoUsd: number, ttlMs: number): Promise<Reserved> {
    assertCost(picoUsd);
    const at = this.#nowMs();
    const periods = budgetPeriods(at);
    const reservation = `${randomAlphanumeric(16)}:${picoUsd}`;
    const spend = limits.map(() => ({ day: 0n, month: 0n }));
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

  #admit(keys: number): (...args: Array<string | number>) => Promise<unknown> {
    let admit = this.#admits.get(keys);
    if (admit === undefined) {
      admit = ADMIT.batched(this.#client, keys);
      this.#admits.set(keys, admit);
    }
    return admit;
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

  /**
   * `add`, then `release`, one script per party, sent together (with the limiter's tokens, which
   * the endpoint adds in the same turn): one round trip when the call ends. A counter missing
   * (Redis lost its data) starts from the spend before, as `add` starts it, before the hold ends.
   */
  async settle(parties: readonly string[], picoUsd: number, reservation: string): Promise<void> {
    assertCost(picoUsd);
    if (parties.length === 0) return;
    const periods = budgetPeriods(this.#nowMs());
    const expiries = this.#expiries(periods);
    const onlyCounted = this.#spentBefore === undefined || picoUsd === 0 ? [] : ['counted'];
    const settled = await answerWithin(
      Promise.all(
        parties.map((party) => this.#settle(...this.#keys(party, periods), this.#holdsKey(party), picoUsd, ...expiries, reservation, ...onlyCounted)),
      ),
      this.#timeoutMs,
    );
    const missing = parties.filter((_, index) => settled[index] === 0);
    if (missing.length === 0) return;
    await this.add(missing, picoUsd);
    await this.release(missing, reservation);
  }

  #expiries(periods: BudgetPeriods): [day: number, month: number] {
    return [periods.day.endsAt + GRACE_MS, periods.month.endsAt + GRACE_MS];
  }

  #keys(party: string, periods: BudgetPeriods): [day: string, month: string] {
    const base = partyKey(this.#keyPrefix, party);
    return [`${base}:day:${periods.day.id}`, `${base}:month:${periods.month.id}`];
  }
}
