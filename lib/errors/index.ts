/**
 * `koa-model-gateway/errors`: the one error formatter (`gatewayErrors()`, in OpenAI's shape or
 * Anthropic's by path), the typed errors every refusal is thrown as (`GatewayError`, `errors.*`,
 * `StoreUnavailableError`), each shape's formatter on its own, and the request's dialect
 * (`requestDialect()`, `dialectOf()`) that picks the shapes.
 */
export { GatewayError, StoreUnavailableError, errors, type ErrorType } from './gateway-error.js';
export { openAIErrors } from './openai-errors.js';
export { anthropicErrors } from './anthropic-errors.js';
export { gatewayErrors, type GatewayErrorsOptions } from './gateway-errors.js';
export { dialectOf, requestDialect, type Dialect, type RequestDialectOptions } from './request-dialect.js';
