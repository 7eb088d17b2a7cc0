/**
 * How failures put a deployment in cooldown: `failures` within `windowMs` make it cool down for
 * `cooldownMs`, or for what a 429's retry-after asks when longer, up to `maxCooldownMs`.
 */
export interface CooldownPolicy {
  failures: number;
  windowMs: number;
  cooldownMs: number;
  maxCooldownMs: number;
}

/** How long a cooldown begun now lasts: `cooldownMs`, or `retryAfterMs` when longer, which `maxCooldownMs` caps. */
export function cooldownLength(policy: CooldownPolicy, retryAfterMs: number): number {
  return Math.max(policy.cooldownMs, Math.min(retryAfterMs, policy.maxCooldownMs));
}

/**
 * What the model handlers learn from failed attempts, shared by every instance that uses the same
 * store: `MemoryCooldownStore` for one process, `RedisCooldownStore` (`koa-model-gateway/stores/redis`)
 * for several. A deployment is named by a string of the handlers' own (provider and upstream model).
 * Both methods are bounded in time; a store that fails makes the handlers route as if nothing
 * cooled down.
 */
export interface CooldownStore {
  /**
   * Counts a failure of `deployment` at `nowMs`. When it is the policy's `failures`-th within its
   * window, the deployment cools down until `nowMs + cooldownLength(policy, retryAfterMs)` (the
   * longer of `cooldownMs` and `retryAfterMs`, this one at most `maxCooldownMs`), and the answer is
   * that time; otherwise (or when it was cooling down already) null.
   */
  fail(deployment: string, policy: CooldownPolicy, nowMs: number, retryAfterMs?: number): Promise<number | null>;
  /** For each of `deployments`, the time its cooldown ends when it is cooling down at `nowMs`, else null. */
  coolingUntil(deployments: readonly string[], nowMs: number): Promise<Array<number | null>>;
}
