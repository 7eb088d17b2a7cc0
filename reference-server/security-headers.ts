import type { Context, Middleware } from 'koa';

/**
 * What every response carries unless a handler set its own (the file download sets
 * `Content-Security-Policy: sandbox`): the API never serves anything a browser should render,
 * sniff or frame.
 */
const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'X-Content-Type-Options': 'nosniff',
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
};

function setMissing(ctx: Context): void {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) {
    if (!ctx.res.hasHeader(name)) ctx.set(name, value);
  }
}

/**
 * Sets the security headers on every response. They are set before the handlers run, for
 * responses streamed straight to the socket, and again on the way out, because the error
 * formatters clear a failed request's headers before writing the error body.
 * @example app.use(securityHeaders())
 */
export function securityHeaders(): Middleware {
  return async function securityHeaders(ctx, next) {
    setMissing(ctx);
    try {
      await next();
    } finally {
      if (!ctx.headerSent) setMissing(ctx);
    }
  };
}
