import { cachedReads, type CachedReadsOptions } from '../cached-reads.js';
import type { AccountBudgets, Budget } from './budgets.js';

/**
 * Changes to an account's budgets: a number sets one (USD), `null` removes it, absent leaves it;
 * `costSoft` makes them soft (`true`) or not (`false`, `null`); `costAlertThresholds` sets their
 * own alert thresholds (percents), `null` goes back to the deployment's.
 */
export interface BudgetChanges {
  costPerDay?: number | null | undefined;
  costPerMonth?: number | null | undefined;
  costSoft?: boolean | null | undefined;
  costAlertThresholds?: number[] | null | undefined;
}

/**
 * Where accounts' budgets are kept. Implementations: `MemoryAccountBudgetStore`,
 * `KnexAccountBudgetStore` (PostgreSQL, SQLite).
 */
export interface AccountBudgetStore extends AccountBudgets {
  /** The account's budgets; `{}` for an account without any. */
  get(account: string): Promise<Budget>;
  /** Applies `changes` and answers the account's budgets after them. */
  set(account: string, changes: BudgetChanges): Promise<Budget>;
}

/** `budget` with `changes` applied: the one rule of every store. */
export function changedBudget(budget: Budget, changes: BudgetChanges): Budget {
  const next: Budget = { ...budget };
  for (const field of ['costPerDay', 'costPerMonth'] as const) {
    const value = changes[field];
    if (value === null) delete next[field];
    else if (value !== undefined) next[field] = value;
  }
  // Not soft is the default: kept as absent, as an unset budget is.
  if (changes.costSoft === true) next.costSoft = true;
  else if (changes.costSoft !== undefined) delete next.costSoft;
  if (changes.costAlertThresholds === null) delete next.costAlertThresholds;
  else if (changes.costAlertThresholds !== undefined) next.costAlertThresholds = [...changes.costAlertThresholds];
  return next;
}

export type CachedAccountBudgetsOptions = CachedReadsOptions;

/**
 * The accounts' budgets read through a cache of `ttlMs`, so that a model call does not wait on the
 * database for them: a change made in any process takes effect everywhere within `ttlMs`. Lookups
 * of one account made while one is under way share it.
 * @example spendBudgets({ ledger, accounts: cachedAccountBudgets(new KnexAccountBudgetStore(knex)) })
 */
export function cachedAccountBudgets(store: AccountBudgets, options: CachedAccountBudgetsOptions = {}): AccountBudgets {
  if (typeof store?.get !== 'function') throw new TypeError('koa-model-gateway: cachedAccountBudgets() needs an AccountBudgetStore');
  return { get: cachedReads((account) => store.get(account), options, 'cachedAccountBudgets()') };
}
