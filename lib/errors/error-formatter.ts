import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Context, Middleware } from 'koa';
import { errors, type GatewayError } from './gateway-error.js';
import { lingeringClose } from './lingering-close.js';
import { newRequestId } from './request-id.js';
import { toGatewayError } from './to-gateway-error.js';

/**
 * The longest wait, in seconds, that a 429 still asks a client to retry after. The official SDKs
 * retry a 429 after its `retry-after`, however long (a spent budget's runs to midnight): past this
 * one, `x-should-retry: false` makes them raise at once.
 */
const LONGEST_RETRY_WAIT_SECONDS = 60;

interface ErrorShape {
  /** The response header that carries the request id. */
  header: string;
  render(err: GatewayError, requestId: string): unknown;
}

/**
 * The one place where error bodies are written. Shared by both shapes: assigns the request id,
 * maps whatever was thrown, and reports every 5xx on `app.on('error')` with the request id on
 * `ctx.state`, as Koa does: see `reported()` for what the listener receives.
 *
 * An error response keeps the headers that were set before the formatter ran (security headers,
 * CORS) with the values they had then; the headers set after it, on the way to the failure, are
 * dropped, as Koa's own `ctx.onerror` drops them, but for a `Connection: close`. An error answered
 * before the request body has arrived whole closes the connection once the body is read
 * (`lingeringClose`). A 429 that waiting will not cure soon (`retry-after` over
 * `LONGEST_RETRY_WAIT_SECONDS`) says `x-should-retry: false`.
 */
export function errorFormatter(shape: ErrorShape, name: string): Middleware {
  const handler = async (ctx: Context, next: () => Promise<unknown>) => {
    // A formatter nested inside another (a Shape B route in a Shape A app) keeps the outer id.
    const requestId = ctx.state.requestId ?? newRequestId();
    ctx.state.requestId = requestId;
    ctx.res.setHeader(shape.header, requestId);
    const outerHeaders = ctx.res.getHeaders();
    let thrown: unknown;
    let failed = false;
    try {
      await next();
    } catch (err) {
      thrown = err;
      failed = true;
    }
    if (!failed) {
      // Koa leaves an unmatched request as an empty 404, and a router's allowedMethods() a wrong
      // method as an empty 405 (501 for a method no route knows) with its Allow header.
      if (ctx.body != null) return;
      if (ctx.status === 404) thrown = errors.unknownUrl(ctx.method, ctx.path);
      else if (ctx.status === 405 || ctx.status === 501) thrown = errors.methodNotAllowed(ctx.method);
      else return;
    }
    const { request, response } = ctx;
    const err = toGatewayError(thrown, request.method, request.path);
    if (err.status >= 500) ctx.app.emit('error', reported(err, thrown), ctx);
    if (response.headerSent || !response.writable) return;
    // HTTP requires the Allow of a 405, whoever set it; a connection set to close (a shutdown)
    // stays so.
    const allow = err.status === 405 ? response.get('Allow') : '';
    const closing = String(ctx.res.getHeader('Connection')).toLowerCase() === 'close';
    resetHeaders(ctx.res, outerHeaders);
    if (allow) response.set('Allow', allow);
    if (closing) response.set('Connection', 'close');
    response.set(err.headers);
    if (err.status === 429 && Number(err.headers['retry-after']) > LONGEST_RETRY_WAIT_SECONDS) response.set('x-should-retry', 'false');
    // Through ctx.response, not ctx's delegating setters: those cost a megamorphic store each.
    response.status = err.status;
    response.body = shape.render(err, requestId);
    // An answer before the body's end: the client may still be writing it.
    lingeringClose(ctx);
  };
  Object.defineProperty(handler, 'name', { value: name });
  return handler;
}

/**
 * What `app.on('error')` hears of a 5xx. A known outage (502, 503, 504: a store or an upstream
 * that failed) is the GatewayError answered, with what was thrown as its `cause`, so a listener
 * can log it briefly by `status` and `code`; anything else (a 500: a bug) is what was thrown,
 * with its stack.
 */
function reported(err: GatewayError, thrown: unknown): unknown {
  if (err.status === 500) return thrown;
  if (err !== thrown) err.cause = thrown;
  return err;
}

/** Puts the response headers back to `headers`, a `getHeaders()` taken earlier. */
function resetHeaders(res: ServerResponse, headers: OutgoingHttpHeaders): void {
  for (const name of res.getHeaderNames()) {
    if (!Object.hasOwn(headers, name)) res.removeHeader(name);
  }
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && res.getHeader(name) !== value) res.setHeader(name, value);
  }
}
