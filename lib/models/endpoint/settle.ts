import type { Context } from 'koa';
import type { BudgetCheck } from '../../cost/budgets.js';
import type { ModelLimiter } from '../../quota/model-limiter.js';
import type { ModelLimits } from '../../quota/model-limits.js';
import type { AdmittedCall, EndpointSetup } from './call.js';

/**
 * The last step of a call that holds a reservation, however it ended: its tokens counted against
 * the key's token limits, its cost replacing its reservation (a call that reached no upstream
 * costs nothing). Neither is awaited: the answer does not wait for them. A limiter or a ledger
 * that fails is reported.
 */
export function settle(ctx: Context, { limiter, budgets }: EndpointSetup, { key, limits, state }: AdmittedCall, budget: BudgetCheck): void {
  const report = (err: unknown) => ctx.app.emit('error', err, ctx);
  const tokens = state.inputTokens + state.outputTokens;
  if (tokens > 0) void addTokens(limiter, key.id, limits, tokens).catch(report);
  void budgets.charge(budget.parties, state.costPicoUsd, budget.reservation).catch(report);
}

// Async, so that a limiter that throws at once still ends in the caller's catch.
async function addTokens(limiter: ModelLimiter, keyId: string, limits: ModelLimits, tokens: number): Promise<void> {
  await limiter.addTokens(keyId, limits, tokens);
}
