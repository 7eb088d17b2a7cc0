import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { clockWindows } from '../../quota/clock-windows.js';
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

// Counters outlive their window by this much, so a release just after the window ends still finds them.
const GRACE_MS = 60_000;

interface Counter {
  limiter: RateLimiterMemory;
  refusal: CreationRefusal;
}

interface Spend {
  counter: Counter;
  key: string;
  points: number;
  /** Seconds the counter lives when this spend creates it. */
  lifetime: number;
}

/**
 * CreationLimiter in process memory, on rate-limiter-flexible's `RateLimiterMemory`: for one
 * process, tests, and as the Redis limiter's insurance. Counters are per clock minute and per
 * UTC day (not rolling). A reservation is decided for all three limits at once: each account's
 * reservations and releases run one at a time, so the points a refused consume counts (and the
 * points of the limits it passed) are given back before any other request of that account looks.
 * @example
 * import { MemoryCreationLimiter } from 'koa-model-gateway/stores/memory';
 * fileQuota({ creationLimiter: new MemoryCreationLimiter({ createsPerMinute: 10 }) })
 */
export class MemoryCreationLimiter implements CreationLimiter {
  readonly limits: CreationLimits;
  // Checked in this order: a refusal names the limit that keeps the upload out longest.
  readonly #counters: Counter[];
  readonly #queues = new Map<string, Promise<unknown>>();

  constructor(options: CreationLimitsOptions = {}) {
    this.limits = resolveCreationLimits(options);
    const counter = (refusal: CreationRefusal): Counter => ({
      limiter: new RateLimiterMemory({ keyPrefix: refusal, points: this.limits[refusal], duration: 0 }),
      refusal,
    });
    this.#counters = [counter('createsPerDay'), counter('bytesPerDay'), counter('createsPerMinute')];
  }

  async reserve(account: string, bytes: number): Promise<CreationReservation> {
    assertByteCount(bytes);
    const nowMs = this.limits.nowMs();
    const spends = this.#spends(account, bytes, nowMs);
    await this.#exclusive(account, async () => {
      for (const [index, spend] of spends.entries()) {
        try {
          await spend.counter.limiter.consume(spend.key, spend.points, { customDuration: spend.lifetime });
        } catch (refused) {
          if (!(refused instanceof RateLimiterRes)) throw refused;
          // rate-limiter-flexible counts a refused consume too: give back this one and those before it.
          await Promise.all(spends.slice(0, index + 1).map((done) => this.#giveBack(done)));
          throw refusalError(spend.counter.refusal, clockWindows(nowMs), nowMs);
        }
      }
    });
    let released: Promise<void> | undefined;
    return {
      release: () => {
        released ??= this.#exclusive(account, async () => {
          await Promise.all(spends.map((spend) => this.#giveBack(spend)));
        });
        return released;
      },
    };
  }

  /** The account's counters in the current minute and UTC day, between reservations. */
  async usage(account: string): Promise<CreationUsage> {
    const spends = this.#spends(account, 0, this.limits.nowMs());
    const counts = await this.#exclusive(account, () =>
      Promise.all(
        spends.map(async ({ counter, key }) => {
          const res = await counter.limiter.get(key);
          return [counter.refusal, res === null || res.msBeforeNext <= 0 ? 0 : res.consumedPoints] as const;
        }),
      ),
    );
    const count = new Map(counts);
    return {
      createsThisMinute: count.get('createsPerMinute') ?? 0,
      createsToday: count.get('createsPerDay') ?? 0,
      bytesToday: count.get('bytesPerDay') ?? 0,
    };
  }

  #spends(account: string, bytes: number, nowMs: number): Spend[] {
    const windows = clockWindows(nowMs);
    return this.#counters.map((counter) => {
      const window = counter.refusal === 'createsPerMinute' ? windows.minute : windows.day;
      return {
        counter,
        key: `${account}:${window.id}`,
        points: counter.refusal === 'bytesPerDay' ? bytes : 1,
        lifetime: Math.ceil((window.endsAt - nowMs + GRACE_MS) / 1000),
      };
    });
  }

  async #giveBack({ counter, key, points, lifetime }: Spend): Promise<void> {
    // A reward on a counter that has expired would start a new one below zero.
    const current = await counter.limiter.get(key);
    if (current !== null && current.msBeforeNext > 0) {
      await counter.limiter.reward(key, points, { customDuration: lifetime });
    }
  }

  /** Runs `task` after every earlier task of `account` has settled. */
  async #exclusive<T>(account: string, task: () => Promise<T>): Promise<T> {
    const run = (this.#queues.get(account) ?? Promise.resolve()).then(task);
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.#queues.set(account, settled);
    try {
      return await run;
    } finally {
      if (this.#queues.get(account) === settled) this.#queues.delete(account);
    }
  }
}
