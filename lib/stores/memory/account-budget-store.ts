import { changedBudget, type AccountBudgetStore, type BudgetChanges } from '../../cost/account-budget-store.js';
import type { Budget } from '../../cost/budgets.js';

/**
 * AccountBudgetStore in process memory: for tests and gateways without a database.
 * @example const accounts = new MemoryAccountBudgetStore()
 */
export class MemoryAccountBudgetStore implements AccountBudgetStore {
  readonly #budgets = new Map<string, Budget>();

  async get(account: string): Promise<Budget> {
    return structuredClone(this.#budgets.get(account) ?? {});
  }

  async set(account: string, changes: BudgetChanges): Promise<Budget> {
    const budget = changedBudget(this.#budgets.get(account) ?? {}, changes);
    this.#budgets.set(account, budget);
    return structuredClone(budget);
  }
}
