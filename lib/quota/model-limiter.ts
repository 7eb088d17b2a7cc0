import type { ModelLimitDecision, ModelLimits, ModelUsage } from './model-limits.js';

/**
 * The limits on model calls, per key: requests per clock minute, tokens per clock minute and per
 * UTC day. Implementations: `MemoryModelLimiter` (one process), `RedisModelLimiter` (every process
 * of a deployment, exact). Both decide by one rule (`decide` in model-limits.ts).
 *
 * How a model endpoint uses it, after the checks of decisions.md's order (401, 403, 400, 404):
 * ```ts
 * const limits = { ...defaults, ...key.limits }
 * const decision = await limiter.consume(key.id, limits)     // StoreUnavailableError: 503
 * if (!decision.allowed) throw modelLimitRefusal(decision, 'openai')  // 429, nothing sent upstream
 * ctx.set(rateLimitHeaders(decision, 'openai'))              // successful answers carry them too
 * // … the upstream call; when its answer ends, with the upstream's own usage:
 * await limiter.addTokens(key.id, limits, inputTokens + outputTokens)  // errors: app.emit('error')
 * ```
 * Tokens are known only when an answer ends, so a token limit refuses calls from the moment the
 * window holds as many tokens as its limit; calls already under way when it fills still finish
 * and count. A window can therefore go over its token limit by the tokens of the calls in flight
 * at that moment (at most the key's concurrent calls times each call's `max_tokens` and input).
 */
export interface ModelLimiter {
  /**
   * Decides one call of `keyId` under `limits` at the limiter's clock, and counts it as a request
   * when it passes. Limits without any field pass without touching the counters. Throws
   * `StoreUnavailableError` when its backend cannot be reached.
   */
  consume(keyId: string, limits: ModelLimits): Promise<ModelLimitDecision>;
  /**
   * Counts the tokens (input + output) of an answer that ended now, in the current minute and day.
   * A no-op when `limits` has no token limit. Throws `StoreUnavailableError` when its backend cannot
   * be reached; a `TypeError` for a count that is not a non-negative integer.
   */
  addTokens(keyId: string, limits: ModelLimits, tokens: number): Promise<void>;
  /** The key's counters in the current minute and UTC day. */
  usage(keyId: string): Promise<ModelUsage>;
}
