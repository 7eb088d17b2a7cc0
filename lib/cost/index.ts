export { callCost, tokenPrice, type ModelPrice, type TokenPrice } from './price.js';
export { picoOfUsd, usdOfPico } from '../picodollars.js';
export { priceCatalog, type PricedCatalog } from './price-table.js';
export {
  MemorySpendLedger,
  budgetPeriods,
  budgetRefusal,
  spendBudgets,
  spendFromUsage,
  type AccountBudgets,
  type Budget,
  type BudgetCheck,
  type BudgetedParty,
  type BudgetPeriods,
  type MemorySpendLedgerOptions,
  type PeriodSpend,
  type SpendBudgets,
  type SpendBudgetsOptions,
  type SpendLedger,
} from './budgets.js';
export {
  MemoryAccountBudgetStore,
  cachedAccountBudgets,
  type AccountBudgetStore,
  type BudgetChanges,
  type CachedAccountBudgetsOptions,
} from './account-budget-store.js';
