/**
 * `koa-model-gateway/cost`: money. Prices per model (`priceCatalog()`), the cost of a call, and
 * budgets (`spendBudgets()` on a `SpendLedger`, accounts' budgets in an `AccountBudgetStore`).
 */
export { callCost, maxCallCost, tokenPrice, type ModelPrice, type TokenPrice } from './price.js';
export { picoOfUsd, usdOfPico } from '../picodollars.js';
export { ALERT_THRESHOLDS_RULE, alertThresholds, BUDGET_RULE, budgetUsd, parseAlertThresholds, parseBudgetUsd } from '../settings/budget-usd.js';
export { priceCatalog, type PricedCatalog } from './price-table.js';
export { webhookNotifier, type AlertClaims, type AlertWebhook, type BudgetAlert, type WebhookNotifierOptions } from './budget-alerts.js';
export {
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
  type PartyLimits,
  type PeriodSpend,
  type Reserved,
  type RotatedKeys,
  type SpendBudgets,
  type SpendBudgetsOptions,
  type SpendLedger,
  type SpentBefore,
} from './budgets.js';
export { cachedAccountBudgets, type AccountBudgetStore, type BudgetChanges, type CachedAccountBudgetsOptions } from './account-budget-store.js';
// The memory implementations, at home in stores/memory, exported here too as before.
export { MemorySpendLedger, type MemorySpendLedgerOptions } from '../stores/memory/spend-ledger.js';
export { MemoryAccountBudgetStore } from '../stores/memory/account-budget-store.js';
export { MemoryAlertClaims } from '../stores/memory/alert-claims.js';
