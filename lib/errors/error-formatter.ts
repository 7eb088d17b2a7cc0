import type { Context, Middleware } from 'koa';
import { errors, type GatewayError } from './gateway-error.js';
import { newRequestId } from './request-id.js';
import { toGatewayError } from './to-gateway-error.js';

declare module 'koa' {
  interface DefaultState {
    /** Set by `openAIErrors()` / `anthropicErrors()`: the id of this request, `req_` + 32 alphanumerics. */
    requestId?: string;
  }
}

interface ErrorShape {
  /** The response header that carries the request id. */
  header: string;
  render(err: GatewayError, requestId: string): unknown;
}

/**
 * The one place where error bodies are written. Shared by both shapes: assigns the request id,
 * maps whatever was thrown, and reports unexpected errors on `app.on('error')` with the request
 * id on `ctx.state`, as Koa does.
 */
export function errorFormatter(shape: ErrorShape, name: string): Middleware {
  const handler = async (ctx: Context, next: () => Promise<unknown>) => {
    // A formatter nested inside another (a Shape B route in a Shape A app) keeps the outer id.
    const requestId = ctx.state.requestId ?? newRequestId();
    ctx.state.requestId = requestId;
    ctx.set(shape.header, requestId);
    try {
      await next();
      // Koa leaves an unmatched request as an empty 404, and a router's allowedMethods() a wrong
      // method as an empty 405 (501 for a method no route knows) with its Allow header.
      if (ctx.body == null) {
        if (ctx.status === 404) throw errors.unknownUrl(ctx.method, ctx.path);
        if (ctx.status === 405 || ctx.status === 501) throw errors.methodNotAllowed(ctx.method);
      }
    } catch (thrown) {
      const err = toGatewayError(thrown, ctx.method, ctx.path);
      if (err.status >= 500) ctx.app.emit('error', thrown, ctx);
      if (ctx.headerSent || !ctx.writable) return;
      // As Koa's own ctx.onerror: headers set on the way down do not belong to the error response,
      // except the Allow that HTTP requires on a 405.
      const allow = err.status === 405 ? ctx.response.get('Allow') : '';
      for (const header of ctx.res.getHeaderNames()) ctx.res.removeHeader(header);
      if (allow) ctx.set('Allow', allow);
      ctx.set(shape.header, requestId);
      ctx.set(err.headers);
      ctx.status = err.status;
      ctx.body = shape.render(err, requestId);
    }
  };
  Object.defineProperty(handler, 'name', { value: name });
  return handler;
}
