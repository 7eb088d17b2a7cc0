import type { Context } from 'koa';
import type { BudgetCheck } from '../../cost/budgets.js';
import { maxCallCost, type TokenPrice } from '../../cost/price.js';
import { errors } from '../../errors/gateway-error.js';
import { dialectOf } from '../../errors/request-dialect.js';
import { usdOfPico } from '../../picodollars.js';
import type { ModelLimitDecision } from '../../quota/model-limits.js';
import { modelLimitRefusal, rateLimitHeaders } from '../../quota/rate-limit-headers.js';
import type { ModelRoute } from '../routing/deployments.js';
import type { AdmittedCall, EndpointSetup } from './call.js';

/**
 * Counts the call against the key's request limits, once per client call however many attempts it
 * takes, a cached answer included: `counted` when the budget's check has counted it already.
 * A refusal is a 429 in the client's dialect; an answer carries the limits' headers.
 */
export async function countRequest(
  ctx: Context,
  { limiter }: EndpointSetup,
  { key, limits, state }: AdmittedCall,
  counted?: ModelLimitDecision,
): Promise<void> {
  const decision = counted ?? (await limiter.consume(key.id, limits));
  if (!decision.allowed) {
    if (decision.refusedBy) state.limitedBy = decision.refusedBy;
    throw modelLimitRefusal(decision, dialectOf(ctx));
  }
  // Node's setHeader, not Koa's `set`: that allocates four arrays a header, on every call.
  if (decision.requests || decision.tokens) {
    const limitHeaders = rateLimitHeaders(decision, dialectOf(ctx));
    for (const name in limitHeaders) ctx.res.setHeader(name, limitHeaders[name] as string);
  }
}

/**
 * Reserves the most the call may cost against the key's and its account's budgets, the request
 * counted with the reservation (one round trip on Redis): a refusal is thrown, nothing held. From
 * the answer on, the call holds the reservation, and `settleCost()` must replace it however the
 * call ends.
 */
export async function reserve(ctx: Context, { format, budgets, limiter }: EndpointSetup, call: AdmittedCall): Promise<BudgetCheck> {
  const { key, route, body, files, limits, state } = call;
  // A count of tokens generates nothing and costs nothing: it reserves nothing either.
  const maxCost =
    format.endpoint === 'countTokens'
      ? 0
      : maxCallCost(
          dearest(route),
          body,
          requestBytes(ctx, body) + files.reduce((sum, file) => sum + file.bytes, 0),
          longestAnswer(route, budgets.defaultMaxOutputTokens),
        );
  // Nothing a call to an unpriced model spends would count against the budget.
  const unpriced = budgets.refuseUnpriced && route.legs.some((leg) => leg.route.model.price === undefined);
  // The request counted with the reservation; not when the budget may refuse the model after.
  const budget = await budgets.check(key, limits, maxCost, unpriced ? undefined : { limiter, keyId: key.id, limits });
  if (budget.refusal) {
    state.limitedBy = 'budget';
    throw budget.refusal;
  }
  if (unpriced && budget.parties.length > 0) {
    await budgets.charge(budget.parties, 0, budget.reservation);
    throw errors.modelUnpriced();
  }
  if (budget.remainingPicoUsd !== undefined) ctx.res.setHeader('x-kmg-budget-remaining-usd', String(usdOfPico(budget.remainingPicoUsd)));
  return budget;
}

/** The dearest price of each kind among the models a call may reach (its model's, its fallbacks'): what its reservation counts by. */
function dearest(route: ModelRoute): TokenPrice {
  const price: TokenPrice = { ...route.price };
  for (const { route: reached } of route.legs) {
    for (const kind of ['input', 'output', 'cacheRead', 'cacheWrite'] as const) price[kind] = Math.max(price[kind], reached.price[kind]);
  }
  return price;
}

/** The most output tokens a call may get from the models it may reach, as their catalog entries say; `fallback` for one that does not. */
function longestAnswer(route: ModelRoute, fallback: number): number {
  return Math.max(route.model.maxOutputTokens ?? fallback, ...route.legs.map(({ route: reached }) => reached.model.maxOutputTokens ?? fallback));
}

/** The size of the request body in bytes: as declared, else as parsed (without its whitespace). */
function requestBytes(ctx: Context, body: Record<string, unknown>): number {
  const declared = Number(ctx.req.headers['content-length']);
  return Number.isSafeInteger(declared) && declared >= 0 ? declared : Buffer.byteLength(JSON.stringify(body));
}
