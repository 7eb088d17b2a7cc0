import { cooldownLength, type CooldownPolicy, type CooldownStore } from '../../models/routing/cooldown-store.js';

interface Health {
  /** Times of the recent failures, oldest first. */
  failures: number[];
  until: number;
}

/**
 * A `CooldownStore` in this process's memory: what one instance learns, only it knows. Holds one
 * small entry per deployment that failed.
 * @example modelsRouter({ catalog, providers, routing: { cooldown: { store: new MemoryCooldownStore() } } })
 */
export class MemoryCooldownStore implements CooldownStore {
  readonly #health = new Map<string, Health>();

  fail(deployment: string, policy: CooldownPolicy, nowMs: number, retryAfterMs = 0): Promise<number | null> {
    const health = this.#health.get(deployment) ?? { failures: [], until: 0 };
    this.#health.set(deployment, health);
    if (health.until > nowMs) return Promise.resolve(null);
    health.failures = health.failures.filter((time) => time > nowMs - policy.windowMs);
    health.failures.push(nowMs);
    if (health.failures.length < policy.failures) return Promise.resolve(null);
    health.failures = [];
    health.until = nowMs + cooldownLength(policy, retryAfterMs);
    return Promise.resolve(health.until);
  }

  coolingUntil(deployments: readonly string[], nowMs: number): Promise<Array<number | null>> {
    return Promise.resolve(
      deployments.map((deployment) => {
        const until = this.#health.get(deployment)?.until ?? 0;
        return until > nowMs ? until : null;
      }),
    );
  }
}
