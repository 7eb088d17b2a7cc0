import type { Middleware } from 'koa';
import { errors } from '../errors/gateway-error.js';
import { verifiedKey } from './api-key.js';
import { SCOPES, isScope, type Scope } from './scopes.js';

/**
 * 403 `Forbidden` unless the verified key carries `scope`. Runs after `apiKey()`.
 * @example router.post('/v1/files', requireScope('files:write'), upload)
 */
export function requireScope(scope: Scope): Middleware {
  // A misspelt scope would refuse every request with a 403 that looks like the client's fault.
  if (!isScope(scope)) throw new TypeError(`koa-model-gateway: requireScope(): unknown scope ${JSON.stringify(scope)} (scopes: ${SCOPES.join(', ')})`);
  return function requireScope(ctx, next) {
    if (!verifiedKey(ctx).scopes.includes(scope)) throw errors.forbidden();
    return next();
  };
}
