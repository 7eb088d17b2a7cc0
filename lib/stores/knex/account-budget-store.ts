import type { Knex } from 'knex';
import { changedBudget, type AccountBudgetStore, type BudgetChanges } from '../../cost/account-budget-store.js';
import type { Budget } from '../../cost/budgets.js';
import { storeTimeoutMs, withinTimeout, type KnexStoreOptions } from './store-options.js';

const TABLE = 'kmg_account_budgets';

interface BudgetRow {
  account: string;
  cost_per_day: number | null;
  cost_per_month: number | null;
  /** SQLite keeps a boolean as 0 or 1. */
  cost_soft: boolean | number;
  /** JSON array of percents; null: the deployment's thresholds. */
  cost_alert_thresholds: string | null;
}

const toBudget = (row: BudgetRow | undefined): Budget => ({
  ...(row?.cost_per_day != null && { costPerDay: Number(row.cost_per_day) }),
  ...(row?.cost_per_month != null && { costPerMonth: Number(row.cost_per_month) }),
  ...(Boolean(row?.cost_soft) && { costSoft: true }),
  ...(row?.cost_alert_thresholds != null && { costAlertThresholds: JSON.parse(row.cost_alert_thresholds) as number[] }),
});

const toRow = (account: string, budget: Budget) => ({
  account,
  cost_per_day: budget.costPerDay ?? null,
  cost_per_month: budget.costPerMonth ?? null,
  cost_soft: budget.costSoft === true,
  cost_alert_thresholds: budget.costAlertThresholds === undefined ? null : JSON.stringify(budget.costAlertThresholds),
});

/**
 * AccountBudgetStore on Knex (PostgreSQL or SQLite), in the table `kmg_account_budgets`. Run
 * `migrate(knex)` first. Every call fails within `timeoutMs` (options: `KnexStoreOptions`).
 * @example const accounts = new KnexAccountBudgetStore(knex)
 */
export class KnexAccountBudgetStore implements AccountBudgetStore {
  readonly #knex: Knex;
  readonly #timeoutMs: number;

  constructor(knex: Knex, options: KnexStoreOptions = {}) {
    this.#knex = knex;
    this.#timeoutMs = storeTimeoutMs(options);
  }

  async get(account: string): Promise<Budget> {
    const row = await withinTimeout(this.#timeoutMs, async () => this.#knex(TABLE).where({ account }).first());
    return toBudget(row as BudgetRow | undefined);
  }

  /** Read and written in one transaction: two changes at once each keep the other's field. */
  async set(account: string, changes: BudgetChanges): Promise<Budget> {
    return withinTimeout(this.#timeoutMs, async () =>
      this.#knex.transaction(async (trx) => {
        const query = trx(TABLE).where({ account }).first();
        // SQLite's write transaction excludes every other writer already.
        if (this.#knex.client.dialect === 'postgresql') query.forUpdate();
        const current = toBudget((await query) as BudgetRow | undefined);
        const budget = changedBudget(current, changes);
        await trx(TABLE).insert(toRow(account, budget)).onConflict('account').merge();
        return budget;
      }),
    );
  }
}
