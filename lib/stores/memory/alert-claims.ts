import type { AlertClaims } from '../../cost/budget-alerts.js';

/** AlertClaims in process memory: for one process, and tests. Claims that have expired are dropped as new ones come. */
export class MemoryAlertClaims implements AlertClaims {
  readonly #claims = new Map<string, number>();
  readonly #nowMs: () => number;

  constructor(options: { nowMs?: () => number } = {}) {
    this.#nowMs = options.nowMs ?? Date.now;
  }

  async claim(name: string, expiresAt: number): Promise<boolean> {
    const now = this.#nowMs();
    for (const [claimed, until] of this.#claims) if (until <= now) this.#claims.delete(claimed);
    if (this.#claims.has(name)) return false;
    this.#claims.set(name, expiresAt);
    return true;
  }
}
