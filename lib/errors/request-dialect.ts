import type { Context, Middleware } from 'koa';
import { isUnderPath } from '../under-path.js';

/**
 * Which API a request speaks: OpenAI's or Anthropic's. It picks the shape of the answer, of its
 * errors and of its rate-limit headers, and is decided once per request (`ctx.state.dialect`).
 */
export type Dialect = 'openai' | 'anthropic';

export interface RequestDialectOptions {
  /**
   * Which requests speak Anthropic's API. Default: every path under /v1/messages, unknown ones
   * included (`/v1/messages/batches`, a `GET /v1/messages`), and every path under /v1/models and
   * /v1/files when the request carries `anthropic-version`, as Anthropic's SDKs send it on every
   * request and OpenAI's never do.
   */
  anthropic?: (ctx: Context) => boolean;
}

/** The paths that speak Anthropic's API besides OpenAI's, chosen by `anthropic-version`. */
const SHAPED_PATHS = ['/v1/models', '/v1/files'];

const speaksAnthropic = (ctx: Context) =>
  isUnderPath(ctx.path, '/v1/messages') || (ctx.req.headers['anthropic-version'] !== undefined && SHAPED_PATHS.some((prefix) => isUnderPath(ctx.path, prefix)));

/** Decides the request's dialect by `anthropic` and puts it on `ctx.state.dialect`; `option` names `anthropic` in the error for a bad one. */
export function dialectRule(anthropic: (ctx: Context) => boolean = speaksAnthropic, option = 'requestDialect(): anthropic'): (ctx: Context) => Dialect {
  if (typeof anthropic !== 'function') throw new TypeError(`koa-model-gateway: ${option} must be a function of ctx`);
  return (ctx) => (ctx.state.dialect = anthropic(ctx) ? 'anthropic' : 'openai');
}

/**
 * Decides which API the request speaks, once, on `ctx.state.dialect`, for the middleware after it:
 * the error shape, the files' and models' shapes, the rate-limit headers. `gatewayErrors()` runs
 * it first thing: mount this one only in a chain without it.
 * @example app.use(requestDialect()).use(openAIErrors())
 */
export function requestDialect(options: RequestDialectOptions = {}): Middleware {
  const decide = dialectRule(options.anthropic);
  return function requestDialect(ctx, next) {
    decide(ctx);
    return next();
  };
}

const byDefault = dialectRule();

/** The request's dialect as decided earlier in the chain; in a chain that did not, by the default rule, kept for the rest of it. */
export function dialectOf(ctx: Context): Dialect {
  return ctx.state.dialect ?? byDefault(ctx);
}
