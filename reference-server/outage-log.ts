import type { Logger } from 'pino';
import type { ReadinessCheck } from './health.js';

export interface OutageLogOptions {
  /** The clock of the counts. Default: `Date.now`. */
  nowMs?: () => number;
  /**
   * The least time between two lines about one store, and how often a store that is away is
   * asked (its readiness check, `watch`) whether it is back, in milliseconds. Default: 1000.
   */
  intervalMs?: number;
}

/** As long as the cause of an outage's line from a request (`logAppError`). */
const MAX_CAUSE_CHARS = 300;

interface Outage {
  startedAt: number;
  lastLineAt: number;
  /** Failed requests and driver warnings since the last line. */
  failures: number;
  warnings: number;
  probe: NodeJS.Timeout | undefined;
}

/**
 * The log of the stores' outages, so that it does not grow with the request rate: one line when a
 * store goes away (the first failed request's, with its cause), then at most one line per
 * `intervalMs` per store counting the failed requests and the driver's warnings (Knex's
 * "Acquire connection error", with its stack, on every attempt) since the last; the first of
 * either is the outage's first line. One line when
 * the store is back, which its readiness check tells. A store without a check is never said to be
 * back: its later failures are counted, a line per `intervalMs` at most.
 * @example
 * const outages = new OutageLog(logger);
 * outages.watch('database', () => knex.raw('select 1'));
 * outages.failed('database', { requestId, cause }); // the first line; the next ones are counted
 */
export class OutageLog {
  readonly #logger: Logger;
  readonly #nowMs: () => number;
  readonly #intervalMs: number;
  readonly #checks = new Map<string, ReadinessCheck>();
  readonly #outages = new Map<string, Outage>();

  constructor(logger: Logger, options: OutageLogOptions = {}) {
    this.#logger = logger;
    this.#nowMs = options.nowMs ?? Date.now;
    this.#intervalMs = options.intervalMs ?? 1000;
  }

  /** Tells when `store` is back: `check` resolves once it answers. */
  watch(store: string, check: ReadinessCheck): void {
    this.#checks.set(store, check);
  }

  /** A request failed because `store` is away; `fields` go on the outage's first line. */
  failed(store: string, fields: Record<string, unknown>): void {
    const outage = this.#outages.get(store);
    if (outage === undefined) {
      this.#begin(store);
      this.#logger.error({ ...fields, store }, 'store unavailable');
      return;
    }
    outage.failures += 1;
    this.#countIfDue(store, outage);
  }

  /**
   * A driver's warning about `store` (Knex's, the pool's): the outage's first line when it comes
   * first, with the warning's first line as its cause (never its stack); counted after that.
   */
  warned(store: string, message: string): void {
    const outage = this.#outages.get(store);
    if (outage === undefined) {
      this.#begin(store);
      this.#logger.error({ store, cause: (message.split('\n', 1)[0] ?? '').slice(0, MAX_CAUSE_CHARS) }, 'store unavailable');
      return;
    }
    outage.warnings += 1;
    this.#countIfDue(store, outage);
  }

  /** Stops asking the stores that are away. */
  close(): void {
    for (const outage of this.#outages.values()) clearInterval(outage.probe);
    this.#outages.clear();
  }

  #begin(store: string): void {
    const now = this.#nowMs();
    const outage: Outage = { startedAt: now, lastLineAt: now, failures: 0, warnings: 0, probe: undefined };
    this.#outages.set(store, outage);
    const check = this.#checks.get(store);
    if (check === undefined) return;
    let asking = false;
    outage.probe = setInterval(() => {
      if (asking) return;
      asking = true;
      check()
        .then(() => this.#end(store, outage))
        .catch(() => undefined)
        .finally(() => (asking = false));
    }, this.#intervalMs).unref();
  }

  #countIfDue(store: string, outage: Outage): void {
    const now = this.#nowMs();
    if (now - outage.lastLineAt < this.#intervalMs) return;
    this.#logger.error(this.#counts(store, outage, now), 'store still unavailable');
    outage.lastLineAt = now;
    outage.failures = 0;
    outage.warnings = 0;
  }

  #end(store: string, outage: Outage): void {
    if (this.#outages.get(store) !== outage) return;
    clearInterval(outage.probe);
    this.#outages.delete(store);
    this.#logger.info(this.#counts(store, outage, this.#nowMs()), 'store is back');
  }

  #counts(store: string, outage: Outage, now: number) {
    return { store, failures: outage.failures, driverWarnings: outage.warnings, downForMs: now - outage.startedAt };
  }
}
