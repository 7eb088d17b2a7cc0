import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { AccountBudgetStore } from '../cost/account-budget-store.js';
import type { KeyStore } from '../auth/key-store.js';
import { budgetPeriods, spendFromUsage, type Budget, type SpendLedger } from '../cost/budgets.js';
import { usdOfPico } from '../picodollars.js';
import type { ModelPrice } from '../cost/price.js';
import { readJsonBody } from '../http/json-body.js';
import { usageReport } from '../usage/usage-report.js';
import type { UsageStore } from '../usage/usage-store.js';
import { ADMIN_API_PATH, changedBy, verifiedAdmin } from './admin-auth.js';
import { changedValues } from './audit-store.js';
import { adminErrors } from './admin-errors.js';
import { accountName, alertThresholdsOrNull, budgetUsdOrNull, costSoftOrNull, keyIdParameter, parseFields } from './key-fields.js';

/** A change of an account's budgets, for the log of every change. */
export interface BudgetChange {
  action: 'account.limits_set';
  adminTokenId: string | null;
  userId?: string;
  account: string;
  /** The fields the request set (a `null` among them removed its budget). */
  fields: string[];
}

export interface BudgetsRouterOptions {
  /** Where accounts' budgets are kept. */
  accounts: AccountBudgetStore;
  /** Where the spend so far is read: the usage records. */
  usageStore: Pick<UsageStore, 'summarize'>;
  /** The model catalog with its prices (`priceCatalog()`), for `GET /models`. */
  catalog: ReadonlyArray<{ id: string; provider: string; upstreamModel?: string; price?: ModelPrice | undefined }>;
  /** Called after each change is made, for the log; `ctx.state.requestId` names the request. */
  onChange?: (change: BudgetChange, ctx: Context) => void;
  /** The clock, in milliseconds since the Unix epoch, that places the spend in its UTC day and month. Default: `Date.now`. */
  nowMs?: () => number;
  /** The spend ledger the budgets are held on: `reserved`, what the account's calls under way hold, is read from it. Default: none (`reserved: 0`). */
  ledger?: Pick<SpendLedger, 'spent'>;
  /** The keys (a `KeyStore`), for `GET /keys/{id}/spend`: a key's spend against its budgets. Default: none (no such route). */
  keys?: Pick<KeyStore, 'get'>;
}

const budgetChanges = z.strictObject({
  costPerDay: budgetUsdOrNull.optional(),
  costPerMonth: budgetUsdOrNull.optional(),
  costSoft: costSoftOrNull.optional(),
  costAlertThresholds: alertThresholdsOrNull.optional(),
});

/**
 * An account's budgets with every field, as the admin API, the CLI and the audit log show them:
 * `null` for a budget or thresholds unset, `costSoft` false unless soft.
 * @example accountBudgetFields({ costPerDay: 5 }) // { costPerDay: 5, costPerMonth: null, costSoft: false, costAlertThresholds: null }
 */
export const accountBudgetFields = (budget: Budget) => ({
  costPerDay: budget.costPerDay ?? null,
  costPerMonth: budget.costPerMonth ?? null,
  costSoft: budget.costSoft === true,
  costAlertThresholds: budget.costAlertThresholds ?? null,
});

const priceObject = (price: ModelPrice | undefined) =>
  price === undefined
    ? null
    : { input: price.input, output: price.output, cache_read: price.cacheRead ?? price.input, cache_write: price.cacheWrite ?? price.input };

/**
 * The admin API's routes for money, under `/admin/v1`, to mount behind `adminAuth()` beside `adminRouter()`:
 * - `GET /models`: the catalog's models with their prices in USD per million tokens (`price: null`
 *   for a model whose price is not known: its calls cost 0);
 * - `GET /accounts/{account}/limits`: the account's budgets (`costPerDay`, `costPerMonth`, USD,
 *   `null` when unset; `costSoft`: they only alert; `costAlertThresholds`: their own alert
 *   percents, `null` for the deployment's) and its spend so far this UTC day and month (`spent: { day, month }`, USD,
 *   from the usage records: calls show within the recorder's flush interval);
 * - `PUT /accounts/{account}/limits` `{ costPerDay?, costPerMonth?, costSoft?, costAlertThresholds? }`: a positive number sets a
 *   budget, `null` removes it (and makes them not soft, or the thresholds the deployment's), a field left out is left as it is; answers as `GET`.
 * - `GET /keys/{id}/spend` (with `keys`): a key's spend this UTC day and month (its line of
 *   rotations', from the usage records) and `reserved`, what its calls under way hold.
 * An account's budgets cover all its keys (`spendBudgets({ accounts })`).
 * @example app.use(budgetsRouter({ accounts: new KnexAccountBudgetStore(knex), usageStore, catalog }).routes())
 */
export function budgetsRouter(options: BudgetsRouterOptions): Router {
  const { accounts, usageStore, catalog, onChange, nowMs = Date.now, ledger, keys } = options;
  if (typeof accounts?.set !== 'function') throw new TypeError('koa-model-gateway: budgetsRouter() needs an AccountBudgetStore as `accounts`');
  if (typeof usageStore?.summarize !== 'function') throw new TypeError('koa-model-gateway: budgetsRouter() needs a UsageStore as `usageStore`');
  if (!Array.isArray(catalog)) throw new TypeError('koa-model-gateway: budgetsRouter() needs the model catalog as `catalog`');
  const models = catalog.map((model) => ({
    object: 'model' as const,
    id: model.id,
    provider: model.provider,
    upstream_model: model.upstreamModel ?? model.id,
    price: priceObject(model.price),
  }));

  // What a party's calls under way hold, in picodollars: 0 without a ledger.
  const heldBy = async (party: string) => (ledger === undefined ? 0n : ((await ledger.spent([party])).held[0] ?? 0n));

  async function limitsObject(account: string, budget: Budget) {
    const now = nowMs();
    const monthStart = Date.parse(`${budgetPeriods(now).month.id}-01T00:00:00Z`);
    const report = await usageReport(usageStore, { account, since: monthStart, by: 'day' });
    const today = report.rows.find((row) => row.group === budgetPeriods(now).day.id);
    const held = await heldBy(`account:${account}`);
    return {
      object: 'account_limits' as const,
      account,
      ...accountBudgetFields(budget),
      spent: { day: today?.costUsd ?? 0, month: report.totals.costUsd },
      reserved: usdOfPico(held),
    };
  }

  const router = new Router({ prefix: ADMIN_API_PATH, sensitive: true, strict: true });
  if (keys !== undefined) {
    // A key's spend is its line of rotations', as its budgets count it.
    const keySpend = spendFromUsage(usageStore, keys);
    router.get('/keys/:id/spend', async (ctx) => {
      const id = parseFields(keyIdParameter, ctx.params.id, 'id');
      const key = await keys.get(id);
      if (!key) throw adminErrors.keyNotFound();
      const party = `key:${key.originalId ?? key.id}`;
      const [spent, held] = await Promise.all([keySpend(party, nowMs()), heldBy(party)]);
      ctx.body = { object: 'key_spend', id, spent: { day: usdOfPico(spent.day), month: usdOfPico(spent.month) }, reserved: usdOfPico(held) };
    });
  }
  router.get('/models', (ctx) => {
    ctx.body = { object: 'list', data: models };
  });
  router.get('/accounts/:account/limits', async (ctx) => {
    const account = parseFields(accountName, ctx.params.account, 'account');
    ctx.body = await limitsObject(account, await accounts.get(account));
  });
  router.put('/accounts/:account/limits', async (ctx) => {
    const account = parseFields(accountName, ctx.params.account, 'account');
    const changes = parseFields(budgetChanges, await readJsonBody(ctx.req, 4096));
    const before = await accounts.get(account);
    const budget = await accounts.set(account, changes);
    const values = changedValues(accountBudgetFields(before), accountBudgetFields(budget), Object.keys(changes));
    ctx.state.audit = { action: 'account.limits_set', account, fields: Object.keys(changes), changes: values };
    onChange?.({ action: 'account.limits_set', ...changedBy(verifiedAdmin(ctx)), account, fields: Object.keys(changes) }, ctx);
    ctx.body = await limitsObject(account, budget);
  });
  return router;
}
