/**
 * `koa-model-gateway/cost`: money. Prices per model (`priceCatalog()`), the cost of a call, and
 * budgets (`spendBudgets()` on a `SpendLedger`, accounts' budgets in an `AccountBudgetStore`).
 */
export { callCost, maxCallCost, tokenPrice, type ModelPrice, type TokenPrice } from './price.js';
export { picoOfUsd, usdOfPico } from '../picodollars.js';
export { BUDGET_RULE, budgetUsd, parseBudgetUsd } from '../settings/budget-usd.js';
export { priceCatalog, type PricedCatalog } from './price-table.js';
export { MemoryAlertClaims, webhookNotifier, type AlertClaims, type AlertWebhook, type BudgetAlert, type WebhookNotifierOptions } from './budget-alerts.js';
export {
  MemorySpendLedger,
  budgetPeriods,
  budgetRefusal,
  fits,
  partyLimits,
  spendBudgets,
  spendFromUsage,
  type AccountBudgets,
  type Budget,
  type BudgetCheck,
  type BudgetedParty,
  type BudgetPeriods,
  type MemorySpendLedgerOptions,
  type PartyLimits,
  type PeriodSpend,
  type Reserved,
  type RotatedKeys,
  type SpendBudgets,
  type SpendBudgetsOptions,
  type SpendLedger,
  type SpentBefore,
} from './budgets.js';
export {
  MemoryAccountBudgetStore,
  cachedAccountBudgets,
  type AccountBudgetStore,
  type BudgetChanges,
  type CachedAccountBudgetsOptions,
} from './account-budget-store.js';
