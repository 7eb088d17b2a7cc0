import type { Context, Middleware } from 'koa';
import { anthropicErrors } from './anthropic-errors.js';
import { openAIErrors } from './openai-errors.js';
import { dialectRule } from './request-dialect.js';

export interface GatewayErrorsOptions {
  /**
   * Which requests speak Anthropic's API, and are answered in Shape B: `requestDialect()`'s
   * `anthropic`, whose default says which.
   */
  anthropicShape?: (ctx: Context) => boolean;
}

/**
 * The error shape of a whole gateway, chosen per request: first it decides the request's dialect
 * (`requestDialect()`, on `ctx.state.dialect`, which the routers after it read too), then answers
 * errors in Shape B with `request-id` (`anthropicErrors()`) for Anthropic's, Shape A with
 * `X-Request-Id` (`openAIErrors()`) for OpenAI's. Put it first in the chain, before `apiKey()`, so
 * that even a 401 is in the request's shape.
 * @example app.use(gatewayErrors()).use(underPath('/v1', apiKey({ store })))
 */
export function gatewayErrors(options: GatewayErrorsOptions = {}): Middleware {
  const decide = dialectRule(options.anthropicShape, 'gatewayErrors(): anthropicShape');
  const shapeA = openAIErrors();
  const shapeB = anthropicErrors();
  return function gatewayErrors(ctx, next) {
    return decide(ctx) === 'anthropic' ? shapeB(ctx, next) : shapeA(ctx, next);
  };
}
