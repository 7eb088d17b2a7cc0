import { clockWindows } from '../../quota/clock-windows.js';
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

export interface MemoryModelLimiterOptions {
  /** The clock, in Unix milliseconds, that places a call in its minute and day. Default `Date.now`. */
  nowMs?: () => number;
}

interface Counters extends ModelUsage {
  minute: string;
  day: string;
}

/**
 * ModelLimiter in process memory: for one process (the embedded default), tests, and as the Redis
 * limiter's insurance. Exact within the process: each decision reads and counts in one
 * synchronous step. Holds one small entry per key id it has limited.
 * @example
 * import { MemoryModelLimiter } from 'koa-model-gateway/stores/memory';
 * modelsRouter({ catalog, providers, modelLimiter: new MemoryModelLimiter() })
 */
export class MemoryModelLimiter implements ModelLimiter {
  readonly #nowMs: () => number;
  readonly #counters = new Map<string, Counters>();

  constructor(options: MemoryModelLimiterOptions = {}) {
    const { nowMs = Date.now } = options;
    if (typeof nowMs !== 'function') throw new TypeError('koa-model-gateway: nowMs must be a function');
    this.#nowMs = nowMs;
  }

  async consume(keyId: string, limits: ModelLimits): Promise<ModelLimitDecision> {
    const now = this.#nowMs();
    if (!hasRateLimits(limits)) return { allowed: true, at: now };
    const counters = this.#current(keyId, now);
    const decision = decide(limits, counters, now);
    if (decision.allowed && limits.requestsPerMinute !== undefined) counters.requestsThisMinute += 1;
    return decision;
  }

  async addTokens(keyId: string, limits: ModelLimits, tokens: number): Promise<void> {
    assertTokenCount(tokens);
    if (!hasTokenLimits(limits) || tokens === 0) return;
    const counters = this.#current(keyId, this.#nowMs());
    counters.tokensThisMinute += tokens;
    counters.tokensToday += tokens;
  }

  async usage(keyId: string): Promise<ModelUsage> {
    if (!this.#counters.has(keyId)) return { requestsThisMinute: 0, tokensThisMinute: 0, tokensToday: 0 };
    const { requestsThisMinute, tokensThisMinute, tokensToday } = this.#current(keyId, this.#nowMs());
    return { requestsThisMinute, tokensThisMinute, tokensToday };
  }

  /** The key's counters, started again for a window that has ended. */
  #current(keyId: string, now: number): Counters {
    const { minute, day } = clockWindows(now);
    let counters = this.#counters.get(keyId);
    if (counters === undefined) {
      counters = { minute: minute.id, day: day.id, requestsThisMinute: 0, tokensThisMinute: 0, tokensToday: 0 };
      this.#counters.set(keyId, counters);
    }
    if (counters.minute !== minute.id) Object.assign(counters, { minute: minute.id, requestsThisMinute: 0, tokensThisMinute: 0 });
    if (counters.day !== day.id) Object.assign(counters, { day: day.id, tokensToday: 0 });
    return counters;
  }
}
