import type { Redis } from 'ioredis';
import { randomAlphanumeric } from '../../random.js';
import type { CreationLimiter, CreationReservation } from '../../quota/creation-limiter.js';
import {
  assertByteCount,
  refusalError,
  resolveCreationLimits,
  type CreationLimits,
  type CreationLimitsOptions,
  type CreationRefusal,
  type CreationUsage,
} from '../../quota/creation-limits.js';
import { clockWindows, type ClockWindows } from '../../quota/clock-windows.js';
import { MemoryCreationLimiter } from '../memory/creation-limiter.js';
import { answerWithin, partyKey, resolveRedisLimiterOptions, type RedisLimiterOptions } from './redis-limiter.js';

export interface RedisCreationLimiterOptions extends CreationLimitsOptions, RedisLimiterOptions {}

// Counters outlive their window by this much: a process whose clock lags a little still finds
// the count, and a release just after the window ends still finds what it spent.
const GRACE_MS = 60_000;

// The three limits in one atomic step: every limit is checked before anything is counted, so a
// refusal counts nothing and no other request ever sees a count that will be given back.
// KEYS: the minute counter, the day hash. ARGV: bytes, createsPerMinute, createsPerDay,
// bytesPerDay, minute key lifetime (ms), day key lifetime (ms), epoch for a new day hash.
const RESERVE = `
local day = redis.call('HMGET', KEYS[2], 'creates', 'bytes')
if (tonumber(day[1]) or 0) + 1 > tonumber(ARGV[3]) then return {'refused', 'createsPerDay'} end
if (tonumber(day[2]) or 0) + tonumber(ARGV[1]) > tonumber(ARGV[4]) then return {'refused', 'bytesPerDay'} end
if (tonumber(redis.call('GET', KEYS[1])) or 0) + 1 > tonumber(ARGV[2]) then return {'refused', 'createsPerMinute'} end
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('HINCRBY', KEYS[2], 'creates', 1)
redis.call('HINCRBY', KEYS[2], 'bytes', ARGV[1])
redis.call('HSETNX', KEYS[2], 'epoch', ARGV[7])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return {'spent', redis.call('HGET', KEYS[2], 'epoch')}
`;

// Gives a reservation back only to the counters it was spent in: the day hash's epoch changes
// when Redis lost its data (a restart without persistence), and then there is nothing to give
// back. KEYS: as RESERVE. ARGV: minus the bytes, the epoch RESERVE answered.
const RELEASE = `
if redis.call('HGET', KEYS[2], 'epoch') ~= ARGV[2] then return 0 end
redis.call('HINCRBY', KEYS[2], 'creates', -1)
redis.call('HINCRBY', KEYS[2], 'bytes', ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('DECR', KEYS[1]) end
return 1
`;

type Keys = [minute: string, day: string];

/**
 * CreationLimiter shared by every process through Redis: per clock minute and per UTC day (not
 * rolling), all three limits decided by one Lua script. rate-limiter-flexible's
 * `RateLimiterRedis` counts one key per call and counts refused calls too, so three of them
 * (or a `RateLimiterUnion`) would let a request that is about to be refused and given back
 * make another one fail; one script over both keys cannot.
 *
 * Redis unreachable: fail closed by default (see `insurance`), within `timeoutMs`. A script that
 * timed out may still run: when its answer arrives late, the reservation is given back.
 * Use a Redis whose `maxmemory-policy` is `noeviction`, so that no counter is evicted.
 * @example
 * const limiter = new RedisCreationLimiter({ client: await createRedisClient(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379') })
 */
export class RedisCreationLimiter implements CreationLimiter {
  readonly limits: CreationLimits;
  readonly #client: Redis;
  readonly #keyPrefix: string;
  readonly #timeoutMs: number;
  readonly #insurance: MemoryCreationLimiter | undefined;

  constructor(options: RedisCreationLimiterOptions) {
    const { client, keyPrefix, insurance, timeoutMs, ...limits } = options;
    this.limits = resolveCreationLimits(limits);
    const redis = resolveRedisLimiterOptions({ client, keyPrefix, insurance, timeoutMs }, 'kmg:creations');
    this.#client = redis.client;
    this.#keyPrefix = redis.keyPrefix;
    this.#timeoutMs = redis.timeoutMs;
    this.#insurance = redis.insurance === 'memory' ? new MemoryCreationLimiter(this.limits) : undefined;
  }

  async reserve(account: string, bytes: number): Promise<CreationReservation> {
    assertByteCount(bytes);
    const nowMs = this.limits.nowMs();
    const windows = clockWindows(nowMs);
    const keys = this.#keys(account, windows);
    const { createsPerMinute, createsPerDay, bytesPerDay } = this.limits;
    const lifetimes = [windows.minute.endsAt, windows.day.endsAt].map((endsAt) => Math.ceil(endsAt - nowMs + GRACE_MS));
    const call = this.#client.eval(RESERVE, 2, ...keys, bytes, createsPerMinute, createsPerDay, bytesPerDay, ...lifetimes, randomAlphanumeric(16));
    let answer: unknown;
    try {
      answer = await this.#answer(call);
    } catch (err) {
      void call
        .then((late) => {
          const [status, epoch] = late as [string, string];
          return status === 'spent' ? this.#release(keys, bytes, epoch) : undefined;
        })
        .catch(() => undefined); // still unreachable: the reservation stays counted until its windows end
      if (this.#insurance) return this.#insurance.reserve(account, bytes);
      throw err;
    }
    const [status, detail] = answer as [string, string];
    if (status === 'refused') throw refusalError(detail as CreationRefusal, windows, nowMs);
    let released: Promise<void> | undefined;
    return {
      release: () => {
        released ??= this.#release(keys, bytes, detail).catch((err: unknown) => {
          released = undefined; // a failed release may be tried again
          throw err;
        });
        return released;
      },
    };
  }

  /** The account's counters in the current minute and UTC day. */
  async usage(account: string): Promise<CreationUsage> {
    const [minute, day] = this.#keys(account, clockWindows(this.limits.nowMs()));
    const replies = await this.#answer(this.#client.multi().get(minute).hmget(day, 'creates', 'bytes').exec());
    const [[, creates], [, [createsToday, bytesToday]]] = replies as [[null, string | null], [null, (string | null)[]]];
    return { createsThisMinute: Number(creates ?? 0), createsToday: Number(createsToday ?? 0), bytesToday: Number(bytesToday ?? 0) };
  }

  async #release(keys: Keys, bytes: number, epoch: string): Promise<void> {
    await this.#answer(this.#client.eval(RELEASE, 2, ...keys, -bytes, epoch));
  }

  #keys(account: string, windows: ClockWindows): Keys {
    const base = partyKey(this.#keyPrefix, account);
    return [`${base}:minute:${windows.minute.id}`, `${base}:day:${windows.day.id}`];
  }

  #answer<T>(call: Promise<T>): Promise<T> {
    return answerWithin(call, this.#timeoutMs);
  }
}
