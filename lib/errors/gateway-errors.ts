import type { Context, Middleware } from 'koa';
import { asksAnthropicShape } from './anthropic-shape.js';
import { isUnderPath } from '../under-path.js';
import { anthropicErrors } from './anthropic-errors.js';
import { openAIErrors } from './openai-errors.js';

export interface GatewayErrorsOptions {
  /**
   * Which requests are answered in Shape B (Anthropic's). Default: every path under /v1/messages,
   * unknown ones included (`/v1/messages/batches`, a `GET /v1/messages`), and every path under
   * /v1/models and /v1/files when the request carries `anthropic-version`, as Anthropic's SDKs
   * send it.
   */
  anthropicShape?: (ctx: Context) => boolean;
}

/** The paths that have an Anthropic shape besides OpenAI's, chosen by `anthropic-version`. */
const SHAPED_PATHS = ['/v1/models', '/v1/files'];

const anthropicPaths = (ctx: Context) =>
  isUnderPath(ctx.path, '/v1/messages') ||
  (asksAnthropicShape(ctx) && SHAPED_PATHS.some((prefix) => isUnderPath(ctx.path, prefix)));

/**
 * The error shape of a whole gateway, chosen per request: Shape B with `request-id`
 * (`anthropicErrors()`) for the Anthropic-style paths, Shape A with `X-Request-Id`
 * (`openAIErrors()`) for everything else. Put it first in the chain, before `apiKey()`, so that
 * even a 401 is in the path's shape.
 * @example app.use(gatewayErrors()).use(underPath('/v1', apiKey({ store })))
 */
export function gatewayErrors(options: GatewayErrorsOptions = {}): Middleware {
  const anthropicShape = options.anthropicShape ?? anthropicPaths;
  if (typeof anthropicShape !== 'function') throw new TypeError('koa-model-gateway: gatewayErrors(): anthropicShape must be a function of ctx');
  const shapeA = openAIErrors();
  const shapeB = anthropicErrors();
  return function gatewayErrors(ctx, next) {
    return anthropicShape(ctx) ? shapeB(ctx, next) : shapeA(ctx, next);
  };
}
