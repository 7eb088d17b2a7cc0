import { z } from 'zod';
import { GatewayError } from '../errors/gateway-error.js';
import { parseOptions, positiveInteger, timerMs } from '../settings/schemas.js';
import type { AlertClaims, BudgetAlert } from './budget-alerts.js';
import { secondsUntil, utcDate } from '../quota/clock-windows.js';
import type { UsageStore } from '../usage/usage-store.js';
import { picoOfUsd, usdOfPico } from '../picodollars.js';
import type { ModelLimiter } from '../quota/model-limiter.js';
import type { ModelLimitDecision, ModelLimits } from '../quota/model-limits.js';

/**
 * Budgets in USD, each optional (absent: none): `costPerDay` per UTC day, `costPerMonth` per UTC
 * calendar month. On a key (its limits, over the deployment's `modelLimits`) they count the key's
 * calls; on an account, the calls of all its keys.
 * @example const budget: Budget = { costPerDay: 5, costPerMonth: 50 }
 */
export interface Budget {
  costPerDay?: number;
  costPerMonth?: number;
  /** Soft: its spend alerts (`spendBudgets()`'s `alerts`), and never refuses a call. Default false. */
  costSoft?: boolean;
  /** The percents of each budget whose crossing sends an alert. Default: `spendBudgets()`'s `alerts.thresholds` (50, 80, 100). */
  costAlertThresholds?: number[];
}

/** Spend in one UTC day and month, in picodollars (exact). */
export interface PeriodSpend {
  day: bigint;
  month: bigint;
}

/** The UTC day and calendar month a time falls in: ids name the counters, `endsAt` is Unix ms. */
export interface BudgetPeriods {
  day: { id: string; endsAt: number };
  month: { id: string; endsAt: number };
}

const DAY_MS = 86_400_000;

/**
 * The UTC day (`2030-01-31`) and month (`2030-01`) of `now` (Unix ms), and when each ends.
 * @example budgetPeriods(Date.parse('2030-01-31T23:59:59Z')).month.endsAt === Date.parse('2030-02-01T00:00:00Z')
 */
export function budgetPeriods(now: number): BudgetPeriods {
  const date = new Date(now);
  return {
    day: { id: utcDate(now), endsAt: (Math.floor(now / DAY_MS) + 1) * DAY_MS },
    month: { id: utcDate(now).slice(0, 7), endsAt: Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1) },
  };
}

/**
 * Where spend is counted, per party (`key:<id>`, `account:<name>`), in the current UTC day and
 * month, and where calls under way hold their maximum cost (a reservation) until they end.
 * Implementations: `MemorySpendLedger` (one process), `RedisSpendLedger` (every process of a
 * deployment). The counts are what budgets are checked against; the usage records stay the
 * account of what was spent.
 */
export interface SpendLedger {
  /**
   * The spend of each party (in order) in the day and month of the ledger's clock, what calls under
   * way hold (`held`, counted in both periods), and that time. Throws `StoreUnavailableError` when
   * its backend cannot be reached.
   */
  spent(parties: readonly string[]): Promise<{ at: number; spend: PeriodSpend[]; held: bigint[] }>;
  /** Adds `picoUsd` to the day and month of each party, now. Throws `StoreUnavailableError` when its backend cannot be reached. */
  add(parties: readonly string[], picoUsd: number): Promise<void>;
  /**
   * Holds `picoUsd` for each party if it fits every limit (spend + held + `picoUsd`, at least one
   * picodollar, at most the limit), atomically per party, across processes for a shared ledger;
   * else holds nothing. The hold lapses `ttlMs` after, unless released first. `reservation` is set
   * when held: give it to `release`. `spend` is each party's spend plus what was held before
   * (0 for a party after the one that refused). Throws `StoreUnavailableError` when its backend cannot be reached.
   */
  reserve(limits: readonly PartyLimits[], picoUsd: number, ttlMs: number): Promise<Reserved>;
  /** Ends a hold that `reserve` made for `parties` (nothing when it has lapsed). */
  release(parties: readonly string[], reservation: string): Promise<void>;
  /**
   * Optional: `reserve`, then, only when every party's hold is made, `consume.limiter.consume()` of
   * the call's request, in one step (`RedisSpendLedger`: one script, one round trip, with a
   * `RedisModelLimiter` on the same client). `decision` is the limiter's, set when it was asked
   * here; unset (a refusal, or a limiter this ledger cannot ask), the caller consumes as usual.
   */
  reserveAndConsume?(
    limits: readonly PartyLimits[],
    picoUsd: number,
    ttlMs: number,
    consume: RequestConsume,
  ): Promise<Reserved & { decision?: ModelLimitDecision }>;
  /** Optional: `add`, then `release`, in one step (`RedisSpendLedger`: one round trip). */
  settle?(parties: readonly string[], picoUsd: number, reservation: string): Promise<void>;
}

/** A call's request, to count on `limiter` once its budgets hold: `limiter.consume(keyId, limits)`. */
export interface RequestConsume {
  limiter: ModelLimiter;
  keyId: string;
  limits: ModelLimits;
}

/** A party's budgets in picodollars, each optional: what a reservation must fit in. */
export interface PartyLimits {
  party: string;
  day?: bigint | undefined;
  month?: bigint | undefined;
}

/** What `SpendLedger.reserve()` answers. */
export interface Reserved {
  at: number;
  spend: PeriodSpend[];
  /** Set when held: the hold's token, for `release`. */
  reservation?: string;
}

/** Whether `picoUsd` more (at least 1) fits `limits` on `spend`: a budget is reached at or over it. */
export function fits(limits: PartyLimits, spend: PeriodSpend, picoUsd: bigint): boolean {
  const wanted = picoUsd > 0n ? picoUsd : 1n;
  return (limits.day === undefined || spend.day + wanted <= limits.day) && (limits.month === undefined || spend.month + wanted <= limits.month);
}

/** Throws for a cost that cannot be one: a bug in the caller, not a client error. */
export function assertCost(picoUsd: number): void {
  if (!Number.isSafeInteger(picoUsd) || picoUsd < 0)
    throw new TypeError(`koa-model-gateway: spend must be a non-negative integer of picodollars, got ${picoUsd}`);
}

/** What a party spent in the UTC day and month of `at` (Unix ms) before a ledger counted it: `spendFromUsage()` makes one. */
export type SpentBefore = (party: string, at: number) => Promise<PeriodSpend>;

/** Where `spendFromUsage()` follows a key's rotations: a `KeyStore`. */
export interface RotatedKeys {
  get(id: string): Promise<{ replacedBy?: string } | undefined>;
}

/** The most keys of one line of rotations whose records `spendFromUsage()` reads: a bound on a loop that follows links. */
const MAX_ROTATIONS = 1000;

/**
 * `spentBefore` for a `MemorySpendLedger` or a `RedisSpendLedger`: a party's spend this UTC day and month as the usage
 * records hold it (`account:<name>` by account; `key:<id>` by key id, and with `keys`, the key's
 * replacements' too, following `replacedBy`: a key's party is the first key of its rotations), one summary per key.
 * @example new MemorySpendLedger({ spentBefore: spendFromUsage(new KnexUsageStore(knex), keyStore) })
 */
export function spendFromUsage(store: Pick<UsageStore, 'summarize'>, keys?: RotatedKeys): SpentBefore {
  if (typeof store?.summarize !== 'function') throw new TypeError('koa-model-gateway: spendFromUsage() needs a UsageStore');
  if (keys !== undefined && typeof keys.get !== 'function') throw new TypeError('koa-model-gateway: spendFromUsage() `keys` must be a KeyStore');
  return async (party, at) => {
    const { day: today, month: thisMonth } = budgetPeriods(at);
    const since = Date.parse(`${thisMonth.id}-01T00:00:00Z`);
    const separator = party.indexOf(':');
    const name = party.slice(separator + 1);
    const filters = party.startsWith('key:') ? (await rotationLine(name, keys)).map((keyId) => ({ keyId, since })) : [{ account: name, since }];
    let month = 0n;
    let day = 0n;
    for (const filter of filters) {
      for (const row of await store.summarize(filter, 'day')) {
        month += row.costPicoUsd;
        if (row.group === today.id) day += row.costPicoUsd;
      }
    }
    return { day, month };
  };
}

/** The key `id` and its replacements, in order; the key alone without a store to follow them in. */
async function rotationLine(id: string, keys: RotatedKeys | undefined): Promise<string[]> {
  const line = [id];
  let next = keys === undefined ? undefined : (await keys.get(id))?.replacedBy;
  while (next !== undefined && line.length < MAX_ROTATIONS && keys !== undefined) {
    line.push(next);
    next = (await keys.get(next))?.replacedBy;
  }
  return line;
}

/** A party whose spend a call is checked against and, once answered, counted for. */
export interface BudgetedParty {
  /** The ledger's name of it: `key:<id>` or `account:<name>`. */
  party: string;
  who: 'key' | 'account';
  budget: Budget;
}

const PERIODS = [
  { per: 'day', field: 'costPerDay', adjective: 'daily' },
  { per: 'month', field: 'costPerMonth', adjective: 'monthly' },
] as const;

/** Each party's budgets in picodollars, as `SpendLedger.reserve()` checks them. */
export function partyLimits(parties: readonly BudgetedParty[]): PartyLimits[] {
  // A soft budget limits nothing: it is watched for alerts only.
  return parties.map(({ party, budget }) => ({
    party,
    ...(budget.costSoft !== true && {
      ...(budget.costPerDay !== undefined && { day: picoOfUsd(budget.costPerDay) }),
      ...(budget.costPerMonth !== undefined && { month: picoOfUsd(budget.costPerMonth) }),
    }),
  }));
}

/**
 * The 429 for the first budget in which `picoUsd` more (a call's reservation; at least one
 * picodollar) does not fit on `spend` (one entry per party, in order; what calls under way hold
 * included) at `at`, or undefined when every budget has room: Shape A `budget_exceeded` (Shape B
 * `rate_limit_error`), the message naming the budget (whose: the key's or the account's; its
 * period), whether it is spent or has too little left for the call, and when it resets; `retry-after` until its
 * period ends (the latest, when several refuse; on a tie, the first: the key's before the
 * account's, the day before the month).
 * @example const refusal = budgetRefusal(parties, (await ledger.spent(parties.map((p) => p.party))).spend, Date.now())
 */
export function budgetRefusal(parties: readonly BudgetedParty[], spend: readonly PeriodSpend[], at: number, picoUsd = 0n): GatewayError | undefined {
  const periods = budgetPeriods(at);
  let reached: { who: BudgetedParty['who']; adjective: string; usd: number; left: bigint; endsAt: number } | undefined;
  parties.forEach(({ who, budget }, index) => {
    for (const { per, field, adjective } of PERIODS) {
      const usd = budget[field];
      const spent = spend[index]?.[per] ?? 0n;
      if (usd === undefined || fits({ party: '', [per]: picoOfUsd(usd) }, { day: spent, month: spent }, picoUsd)) continue;
      const { endsAt } = periods[per];
      if (reached === undefined || endsAt > reached.endsAt) reached = { who, adjective, usd, left: picoOfUsd(usd) - spent, endsAt };
    }
  });
  if (reached === undefined) return undefined;
  const { who, adjective, usd, left, endsAt } = reached;
  const budget = `the ${who}'s ${adjective} budget of ${usd} USD`;
  const why = left <= 0n ? 'is spent' : `has ${usdOfPico(left)} USD left, less than this call's maximum cost of ${usdOfPico(picoUsd)} USD`;
  const message = `Budget exceeded: ${budget} ${why}; it resets at ${new Date(endsAt).toISOString().replace('.000Z', 'Z')}`;
  return new GatewayError(429, 'rate_limit_error', 'budget_exceeded', message, { 'retry-after': String(secondsUntil(endsAt, at)) });
}

/** Where an account's budgets are read: an `AccountBudgetStore`, or `cachedAccountBudgets()` of one. */
export interface AccountBudgets {
  get(account: string): Promise<Budget>;
}

/** What `spendBudgets()` is made of. */
export interface SpendBudgetsOptions {
  ledger: SpendLedger;
  /** The accounts' budgets, which cover all their keys. Default: none. */
  accounts?: AccountBudgets;
  /**
   * How long a call's reservation holds at most, in ms: a process that dies with calls under way
   * holds their reservations no longer than this. A call still running then is no longer reserved
   * for (its real cost is still charged when it ends). Default 900,000 (15 minutes).
   */
  reservationTtlMs?: number;
  /**
   * The output tokens reserved for a call that names no maximum (`max_tokens`,
   * `max_output_tokens`, `max_completion_tokens`). Default 4096.
   */
  defaultMaxOutputTokens?: number;
  /**
   * Whether a call to a model with no known price (whose calls cost 0: `priceCatalog()`'s
   * `unpriced`) is refused, 400 `model_unpriced`, when its key or account has a budget. Default false.
   */
  refuseUnpriced?: boolean;
  /**
   * Alerts when a call's cost takes a budget's spend past one of its thresholds, once per threshold,
   * party and period, decided by `claims` (`MemoryAlertClaims`, `RedisAlertClaims`), sent by
   * `notify` (`webhookNotifier()`): after the charge, never on a call's way. `thresholds`: the
   * percents of a budget that alert, unless the budget names its own (`costAlertThresholds`).
   * Default: none.
   */
  alerts?: { claims: AlertClaims; notify: (alert: BudgetAlert) => void; thresholds?: number[] };
}

/** What `SpendBudgets.check()` answers. */
export interface BudgetCheck {
  /** Set when a budget is reached, or the call's reservation does not fit: the 429 of `budgetRefusal()`, to throw; nothing may be forwarded. */
  refusal?: GatewayError;
  /** The parties to `charge` once the call has its cost; none when neither the key nor its account has a budget (nothing is read nor counted then). */
  parties: string[];
  /** The call's reservation, for `charge`: set when `parties` are. */
  reservation?: string;
  /** What is left of the tightest budget once the call's reservation is held, in picodollars: set when `parties` are. */
  remainingPicoUsd?: bigint;
  /** Set when the call's request was counted with its reservation (`check`'s `consume`): the limiter's decision, in place of consuming. */
  decision?: ModelLimitDecision;
}

/** What `spendBudgets()` returns: the two steps of a model call. */
export interface SpendBudgets {
  /** The output tokens reserved for a call that names no maximum: `SpendBudgetsOptions.defaultMaxOutputTokens`. */
  readonly defaultMaxOutputTokens: number;
  /** `SpendBudgetsOptions.refuseUnpriced`. */
  readonly refuseUnpriced: boolean;
  /**
   * Before the call is forwarded: reserves `maxPicoUsd` (the call's maximum cost: `maxCallCost()`)
   * against the key's and its account's budgets, or refuses when it does not fit one of them.
   * A key's spend is that of its line of rotations: counted as the first key's (`originalId`).
   * With `consume`, a ledger that can (`SpendLedger.reserveAndConsume`) counts the call's request
   * in the same step, once the reservation holds, and answers the `decision`.
   */
  check(key: { id: string; account: string; originalId?: string }, keyBudget: Budget, maxPicoUsd?: number, consume?: RequestConsume): Promise<BudgetCheck>;
  /** When the answer has ended (answered, failed or abandoned): counts its cost for the parties `check` answered, then ends its `reservation`. */
  charge(parties: readonly string[], picoUsd: number, reservation?: string): Promise<void>;
}

const hasBudget = (budget: Budget) => budget.costPerDay !== undefined || budget.costPerMonth !== undefined;

/**
 * Budgets in money for the model endpoints: a key's (its limits' `costPerDay`, `costPerMonth`)
 * and its account's (`accounts`), on a shared `ledger`. Before a call is forwarded it reserves its
 * maximum cost against each, and is refused when that does not fit; when it ends, its real cost
 * replaces the reservation. With every call naming its maximum output, spend never passes a
 * budget, however many calls are under way; a call that names none reserves
 * `defaultMaxOutputTokens`, and may pass its budget by what it spends over its reservation.
 * @example
 * const budgets = spendBudgets({ ledger: new RedisSpendLedger({ client }), accounts: cachedAccountBudgets(store) })
 * const { refusal, parties, reservation } = await budgets.check(key, { costPerDay: 5 }, maxCallCost(price, body, bytes, budgets.defaultMaxOutputTokens))
 * if (refusal) throw refusal // 429, nothing sent upstream
 * // … the call; when it ends:
 * await budgets.charge(parties, costPicoUsd, reservation)
 */
export function spendBudgets(options: SpendBudgetsOptions): SpendBudgets {
  const { ledger, accounts } = options;
  const { reservationTtlMs, defaultMaxOutputTokens, refuseUnpriced } = parseOptions(reservationOptions, options, 'spendBudgets()');
  if (options.alerts?.thresholds?.some((threshold) => !Number.isSafeInteger(threshold) || threshold <= 0))
    throw new TypeError('koa-model-gateway: spendBudgets(): alerts.thresholds must be positive whole percents');
  const alerts = options.alerts === undefined ? undefined : { ...options.alerts, thresholds: options.alerts.thresholds ?? DEFAULT_ALERT_THRESHOLDS };
  // The budgets each reservation was made against, until it is charged: what its alerts compare to.
  const watched = new Map<string, BudgetedParty[]>();
  if (typeof ledger?.spent !== 'function' || typeof ledger.add !== 'function' || typeof ledger.reserve !== 'function')
    throw new TypeError('koa-model-gateway: spendBudgets() needs a SpendLedger as `ledger`');
  if (accounts !== undefined && typeof accounts.get !== 'function') throw new TypeError('koa-model-gateway: spendBudgets() `accounts` must have get(account)');
  return {
    defaultMaxOutputTokens,
    refuseUnpriced,
    async check(key, keyBudget, maxPicoUsd = 0, consume) {
      const parties: BudgetedParty[] = [];
      // A replacement and the key it replaced spend against one budget: a rotation resets no spend.
      if (hasBudget(keyBudget)) parties.push({ party: `key:${key.originalId ?? key.id}`, who: 'key', budget: keyBudget });
      const accountBudget = accounts === undefined ? {} : await accounts.get(key.account);
      if (hasBudget(accountBudget)) parties.push({ party: `account:${key.account}`, who: 'account', budget: accountBudget });
      if (parties.length === 0) return { parties: [] };
      const limits = partyLimits(parties);
      const { at, spend, reservation, decision } =
        consume !== undefined && ledger.reserveAndConsume !== undefined
          ? await ledger.reserveAndConsume(limits, maxPicoUsd, reservationTtlMs, consume)
          : { ...(await ledger.reserve(limits, maxPicoUsd, reservationTtlMs)), decision: undefined };
      if (reservation === undefined) {
        // The ledger's word is final: should its arithmetic differ from ours, the latest-ending budget is named.
        const refusal = budgetRefusal(parties, spend, at, BigInt(maxPicoUsd)) ?? (budgetRefusal(parties, spend, at, UNFITTING) as GatewayError);
        return { refusal, parties: [] };
      }
      if (alerts !== undefined) watched.set(reservation, parties);
      const left = remaining(limits, spend, BigInt(maxPicoUsd));
      return {
        parties: limits.map(({ party }) => party),
        reservation,
        ...(left !== undefined && { remainingPicoUsd: left }),
        ...(decision !== undefined && { decision }),
      };
    },
    async charge(parties, picoUsd, reservation) {
      if (parties.length === 0) return;
      // The hold ends after the cost is counted: in between, the call counts twice (over, never under).
      if (reservation !== undefined && ledger.settle !== undefined) {
        await ledger.settle(parties, picoUsd, reservation);
      } else {
        if (picoUsd > 0) await ledger.add(parties, picoUsd);
        if (reservation !== undefined) await ledger.release(parties, reservation);
      }
      const budgeted = reservation === undefined ? undefined : watched.get(reservation);
      if (reservation !== undefined) watched.delete(reservation);
      if (alerts !== undefined && budgeted !== undefined && picoUsd > 0) await alert(alerts, ledger, budgeted);
    },
  };
}

const UNFITTING = 2n ** 128n;
const DEFAULT_ALERT_THRESHOLDS = [50, 80, 100];

/** Claims and notifies each threshold of `parties`' budgets that their spend has crossed. */
async function alert(alerts: Required<NonNullable<SpendBudgetsOptions['alerts']>>, ledger: SpendLedger, parties: readonly BudgetedParty[]): Promise<void> {
  const { at, spend } = await ledger.spent(parties.map(({ party }) => party));
  const periods = budgetPeriods(at);
  await Promise.all(
    parties.flatMap(({ party, who, budget }, index) =>
      PERIODS.flatMap(({ per, field }) => {
        const usd = budget[field];
        const spent = spend[index]?.[per] ?? 0n;
        if (usd === undefined) return [];
        return (budget.costAlertThresholds ?? alerts.thresholds)
          .filter((threshold) => spent * 100n >= picoOfUsd(usd) * BigInt(threshold))
          .map(async (threshold) => {
            // Kept a day past the period's end: a process whose clock lags a little still finds it.
            const claimed = await alerts.claims.claim(`${party}:${periods[per].id}:${threshold}`, periods[per].endsAt + 86_400_000);
            if (claimed)
              alerts.notify({
                type: 'budget.threshold',
                scope: who,
                id: party.slice(party.indexOf(':') + 1),
                threshold,
                spent_usd: usdOfPico(spent),
                budget_usd: usd,
                period: per,
              });
          });
      }),
    ),
  );
}

const reservationOptions = z.object({
  reservationTtlMs: timerMs.default(900_000),
  defaultMaxOutputTokens: positiveInteger.default(4096),
  refuseUnpriced: z.boolean({ error: 'must be true or false' }).default(false),
});

/** The room left in the tightest of `limits` once `held` more is held on `spend`; undefined when none limits (soft budgets only). */
function remaining(limits: readonly PartyLimits[], spend: readonly PeriodSpend[], held: bigint): bigint | undefined {
  let least: bigint | undefined;
  limits.forEach((limit, index) => {
    const spent = spend[index] as PeriodSpend;
    for (const per of ['day', 'month'] as const) {
      const room = limit[per] === undefined ? undefined : (limit[per] as bigint) - spent[per] - held;
      if (room !== undefined && (least === undefined || room < least)) least = room;
    }
  });
  return least === undefined || least > 0n ? least : 0n;
}
