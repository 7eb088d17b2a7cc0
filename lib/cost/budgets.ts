import { GatewayError } from '../errors/gateway-error.js';
import { secondsUntil, utcDate } from '../quota/clock-windows.js';
import type { UsageStore } from '../usage/usage-store.js';
import { picoOfUsd } from '../picodollars.js';

/**
 * Budgets in USD, each optional (absent: none): `costPerDay` per UTC day, `costPerMonth` per UTC
 * calendar month. On a key (its limits, over the deployment's `modelLimits`) they count the key's
 * calls; on an account, the calls of all its keys.
 * @example const budget: Budget = { costPerDay: 5, costPerMonth: 50 }
 */
export interface Budget {
  costPerDay?: number;
  costPerMonth?: number;
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
 * month. Implementations: `MemorySpendLedger` (one process), `RedisSpendLedger` (every process
 * of a deployment). The counts are what budgets are checked against; the usage records stay the
 * account of what was spent.
 */
export interface SpendLedger {
  /** The spend of each party (in order) in the day and month of the ledger's clock, and that time. Throws `StoreUnavailableError` when its backend cannot be reached. */
  spent(parties: readonly string[]): Promise<{ at: number; spend: PeriodSpend[] }>;
  /** Adds `picoUsd` to the day and month of each party, now. Throws `StoreUnavailableError` when its backend cannot be reached. */
  add(parties: readonly string[], picoUsd: number): Promise<void>;
}

/** Throws for a cost that cannot be one: a bug in the caller, not a client error. */
export function assertCost(picoUsd: number): void {
  if (!Number.isSafeInteger(picoUsd) || picoUsd < 0) throw new TypeError(`koa-model-gateway: spend must be a non-negative integer of picodollars, got ${picoUsd}`);
}

/** What a party spent in the UTC day and month of `at` (Unix ms) before a ledger counted it: `spendFromUsage()` makes one. */
export type SpentBefore = (party: string, at: number) => Promise<PeriodSpend>;

/**
 * `spentBefore` for a `MemorySpendLedger` or a `RedisSpendLedger`: a party's spend this UTC day and month as the usage
 * records hold it (`key:<id>` by key id, `account:<name>` by account), read with one summary.
 * @example new MemorySpendLedger({ spentBefore: spendFromUsage(new KnexUsageStore(knex)) })
 */
export function spendFromUsage(store: Pick<UsageStore, 'summarize'>): SpentBefore {
  if (typeof store?.summarize !== 'function') throw new TypeError('koa-model-gateway: spendFromUsage() needs a UsageStore');
  return async (party, at) => {
    const { day: today, month: thisMonth } = budgetPeriods(at);
    const since = Date.parse(`${thisMonth.id}-01T00:00:00Z`);
    const separator = party.indexOf(':');
    const name = party.slice(separator + 1);
    const filter = party.startsWith('key:') ? { keyId: name, since } : { account: name, since };
    const rows = await store.summarize(filter, 'day');
    let month = 0n;
    let day = 0n;
    for (const row of rows) {
      month += row.costPicoUsd;
      if (row.group === today.id) day += row.costPicoUsd;
    }
    return { day, month };
  };
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

/**
 * The 429 for the first budget that `spend` (one entry per party, in order) has reached at `at`,
 * or undefined when every budget has room: Shape A `budget_exceeded` (Shape B `rate_limit_error`),
 * the message naming the budget, `retry-after` until its period ends (the latest, when several
 * are reached; on a tie, the first: the key's before the account's, the day before the month). A
 * budget is reached when the spend is at or over it.
 * @example const refusal = budgetRefusal(parties, (await ledger.spent(parties.map((p) => p.party))).spend, Date.now())
 */
export function budgetRefusal(parties: readonly BudgetedParty[], spend: readonly PeriodSpend[], at: number): GatewayError | undefined {
  const periods = budgetPeriods(at);
  let reached: { who: BudgetedParty['who']; adjective: string; usd: number; endsAt: number } | undefined;
  parties.forEach(({ who, budget }, index) => {
    for (const { per, field, adjective } of PERIODS) {
      const usd = budget[field];
      const spent = spend[index]?.[per] ?? 0n;
      if (usd === undefined || spent < picoOfUsd(usd)) continue;
      const { endsAt } = periods[per];
      if (reached === undefined || endsAt > reached.endsAt) reached = { who, adjective, usd, endsAt };
    }
  });
  if (reached === undefined) return undefined;
  const { who, adjective, usd, endsAt } = reached;
  return new GatewayError(429, 'rate_limit_error', 'budget_exceeded', `Budget exceeded: the ${who}'s ${adjective} budget of ${usd} USD is spent`, {
    'retry-after': String(secondsUntil(endsAt, at)),
  });
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
}

/** What `SpendBudgets.check()` answers. */
export interface BudgetCheck {
  /** Set when a budget is reached: the 429 of `budgetRefusal()`, to throw; nothing may be forwarded. */
  refusal?: GatewayError;
  /** The parties to `charge` once the call has its cost; none when neither the key nor its account has a budget (nothing is read nor counted then). */
  parties: string[];
}

/** What `spendBudgets()` returns: the two steps of a model call. */
export interface SpendBudgets {
  /** Before the call is forwarded: whether the key's or its account's spend has reached a budget. */
  check(key: { id: string; account: string }, keyBudget: Budget): Promise<BudgetCheck>;
  /** When the answer has ended: counts its cost for the parties `check` answered. */
  charge(parties: readonly string[], picoUsd: number): Promise<void>;
}

const hasBudget = (budget: Budget) => budget.costPerDay !== undefined || budget.costPerMonth !== undefined;

/**
 * Budgets in money for the model endpoints: a key's (its limits' `costPerDay`, `costPerMonth`)
 * and its account's (`accounts`), checked before a call is forwarded, charged when its answer
 * ends, on a shared `ledger`. The spend of a call is known only when it ends, so calls already
 * under way when a budget is reached still finish and count: a budget is overshot by at most the
 * cost of the calls in flight at that moment (each a key's or account's concurrent calls).
 * @example
 * const budgets = spendBudgets({ ledger: new RedisSpendLedger({ client }), accounts: cachedAccountBudgets(store) })
 * const { refusal, parties } = await budgets.check(key, { costPerDay: 5 })
 * if (refusal) throw refusal // 429, nothing sent upstream
 * // … the call; when it ends:
 * await budgets.charge(parties, costPicoUsd)
 */
export function spendBudgets(options: SpendBudgetsOptions): SpendBudgets {
  const { ledger, accounts } = options;
  if (typeof ledger?.spent !== 'function' || typeof ledger.add !== 'function') throw new TypeError('koa-model-gateway: spendBudgets() needs a SpendLedger as `ledger`');
  if (accounts !== undefined && typeof accounts.get !== 'function') throw new TypeError('koa-model-gateway: spendBudgets() `accounts` must have get(account)');
  return {
    async check(key, keyBudget) {
      const parties: BudgetedParty[] = [];
      if (hasBudget(keyBudget)) parties.push({ party: `key:${key.id}`, who: 'key', budget: keyBudget });
      const accountBudget = accounts === undefined ? {} : await accounts.get(key.account);
      if (hasBudget(accountBudget)) parties.push({ party: `account:${key.account}`, who: 'account', budget: accountBudget });
      if (parties.length === 0) return { parties: [] };
      const names = parties.map(({ party }) => party);
      const { at, spend } = await ledger.spent(names);
      const refusal = budgetRefusal(parties, spend, at);
      return refusal ? { refusal, parties: [] } : { parties: names };
    },
    async charge(parties, picoUsd) {
      if (parties.length > 0 && picoUsd > 0) await ledger.add(parties, picoUsd);
    },
  };
}
