import { assertCost, budgetPeriods, fits, type PartyLimits, type PeriodSpend, type Reserved, type SpendLedger, type SpentBefore } from '../../cost/budgets.js';

export interface MemorySpendLedgerOptions {
  /** The clock, in Unix ms, that places spend in its day and month. Default `Date.now`. */
  nowMs?: () => number;
  /**
   * What a party spent in the UTC day and month of `at` (the ledger's clock, Unix ms) before this
   * process counted it: asked once per party, the first time its spend is read.
   * `spendFromUsage(usageStore)` reads it from the usage records, so that a restart forgets nothing
   * written. Default: nothing (0).
   */
  spentBefore?: SpentBefore;
}

/**
 * SpendLedger in process memory: for one process, and tests; its reservations are exact (made in
 * one turn of the event loop), and lapse after their `ttlMs` should a release never come. Each process counts its own calls
 * only: use `RedisSpendLedger` for several. With `spentBefore`, a party's spend starts from what
 * the usage records hold (a restart forgets nothing written); without it, from 0.
 * @example const ledger = new MemorySpendLedger({ spentBefore: spendFromUsage(usageStore) })
 */
export class MemorySpendLedger implements SpendLedger {
  readonly #nowMs: () => number;
  readonly #spentBefore: SpentBefore | undefined;
  readonly #counters = new Map<string, Counter>();
  // The parties whose earlier spend is added, or being read: once each, shared by concurrent reads.
  readonly #seeded = new Map<string, Promise<void>>();
  // Each party's holds, by reservation.
  readonly #holds = new Map<string, Map<string, { picoUsd: bigint; expiresAt: number }>>();
  #nextReservation = 1;

  constructor(options: MemorySpendLedgerOptions = {}) {
    const { nowMs = Date.now, spentBefore } = options;
    if (typeof nowMs !== 'function') throw new TypeError('koa-model-gateway: nowMs must be a function');
    if (spentBefore !== undefined && typeof spentBefore !== 'function') throw new TypeError('koa-model-gateway: spentBefore must be a function');
    this.#nowMs = nowMs;
    this.#spentBefore = spentBefore;
  }

  async spent(parties: readonly string[]): Promise<{ at: number; spend: PeriodSpend[]; held: bigint[] }> {
    if (this.#spentBefore !== undefined) await Promise.all(parties.map((party) => this.#seed(party)));
    const at = this.#nowMs();
    return {
      at,
      spend: parties.map((party) => {
        const { day, month } = this.#current(party, at);
        return { day, month };
      }),
      held: parties.map((party) => this.#heldBy(party, at)),
    };
  }

  async add(parties: readonly string[], picoUsd: number): Promise<void> {
    assertCost(picoUsd);
    const at = this.#nowMs();
    for (const party of parties) {
      const counter = this.#current(party, at);
      counter.day += BigInt(picoUsd);
      counter.month += BigInt(picoUsd);
    }
  }

  async reserve(limits: readonly PartyLimits[], picoUsd: number, ttlMs: number): Promise<Reserved> {
    assertCost(picoUsd);
    if (this.#spentBefore !== undefined) await Promise.all(limits.map(({ party }) => this.#seed(party)));
    // From here to the end, synchronous: no other call's reservation comes in between.
    const at = this.#nowMs();
    const spend = limits.map(() => ({ day: 0n, month: 0n }));
    for (const [index, partyLimits] of limits.entries()) {
      const { day, month } = this.#current(partyLimits.party, at);
      const held = this.#heldBy(partyLimits.party, at);
      spend[index] = { day: day + held, month: month + held };
      if (!fits(partyLimits, spend[index], BigInt(picoUsd))) return { at, spend };
    }
    const reservation = `${this.#nextReservation++}`;
    for (const { party } of limits) {
      let holds = this.#holds.get(party);
      if (holds === undefined) this.#holds.set(party, (holds = new Map()));
      holds.set(reservation, { picoUsd: BigInt(picoUsd), expiresAt: at + ttlMs });
    }
    return { at, spend, reservation };
  }

  async release(parties: readonly string[], reservation: string): Promise<void> {
    for (const party of parties) {
      const holds = this.#holds.get(party);
      holds?.delete(reservation);
      if (holds?.size === 0) this.#holds.delete(party);
    }
  }

  /** What the party's calls under way hold at `at`: the holds that lapsed are dropped. */
  #heldBy(party: string, at: number): bigint {
    const holds = this.#holds.get(party);
    if (holds === undefined) return 0n;
    let held = 0n;
    for (const [reservation, hold] of holds) {
      if (hold.expiresAt <= at) holds.delete(reservation);
      else held += hold.picoUsd;
    }
    return held;
  }

  /**
   * Adds what the party spent before this process counted it, once. Calls are charged only after a
   * read of their party's spend has seen it: so nothing charged here is in what is added.
   */
  #seed(party: string): Promise<void> {
    let seeding = this.#seeded.get(party);
    if (seeding === undefined) {
      const at = this.#nowMs();
      seeding = (this.#spentBefore as SpentBefore)(party, at).then((before) => {
        const counter = this.#current(party, at);
        counter.day += before.day;
        counter.month += before.month;
      });
      this.#seeded.set(party, seeding);
      // A failed read is tried again by the next call (which fails until it succeeds: a 503).
      seeding.catch(() => this.#seeded.delete(party));
    }
    return seeding;
  }

  /** The party's counter, each period started again once it has ended. */
  #current(party: string, at: number): Counter {
    const { day, month } = budgetPeriods(at);
    let counter = this.#counters.get(party);
    if (counter === undefined) {
      counter = { dayId: day.id, monthId: month.id, day: 0n, month: 0n };
      this.#counters.set(party, counter);
    }
    if (counter.dayId !== day.id) Object.assign(counter, { dayId: day.id, day: 0n });
    if (counter.monthId !== month.id) Object.assign(counter, { monthId: month.id, month: 0n });
    return counter;
  }
}

interface Counter extends PeriodSpend {
  dayId: string;
  monthId: string;
}
