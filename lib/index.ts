/**
 * `koa-model-gateway`: the chain every gateway starts with, and nothing else, so that importing it
 * loads no router, no upload parser and no provider (undici):
 * `app.use(gatewayErrors()).use(underPath('/v1', apiKey({ store })))`, and `requireScope()` on a
 * route of your own. Each feature has its own entry point: `koa-model-gateway/errors`, `/auth`,
 * `/files`, `/quota`, `/models`, `/usage`, `/cost`, `/admin`, `/metrics`, `/tracing`, `/settings`,
 * `/testing` and `/stores/<memory|knex|redis|fs|s3>`, where `gatewayErrors` (`/errors`), `apiKey`
 * and `requireScope` (`/auth`) are exported as well.
 */
export { gatewayErrors } from './errors/gateway-errors.js';
export { apiKey } from './auth/api-key.js';
export { requireScope } from './auth/require-scope.js';
export { underPath } from './under-path.js';
