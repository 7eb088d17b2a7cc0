import type { Middleware } from 'koa';

/** True for `prefix` itself and every path under it (`prefix/...`), compared exactly, case included. */
export const isUnderPath = (path: string, prefix: string): boolean => path === prefix || (path.startsWith(prefix) && path.charCodeAt(prefix.length) === 0x2f); // '/'

/**
 * Runs `middleware` for `prefix` and every path under it, known routes or not, and passes every
 * other request on. Paths compare exactly, as the routers of this package match them (`/V1/files`
 * is not under `/v1`). Put `apiKey()` in it so that every request under /v1 is authenticated
 * before any router looks at it, and the health probes outside it stay open.
 * @example app.use(underPath('/v1', apiKey({ store })))
 */
export function underPath(prefix: string, middleware: Middleware): Middleware {
  if (!prefix.startsWith('/') || prefix.endsWith('/')) {
    throw new TypeError(`koa-model-gateway: underPath(): the prefix must start with / and not end with one, got '${prefix}'`);
  }
  if (typeof middleware !== 'function') throw new TypeError('koa-model-gateway: underPath() needs a middleware');
  return function underPath(ctx, next) {
    return isUnderPath(ctx.path, prefix) ? middleware(ctx, next) : next();
  };
}
