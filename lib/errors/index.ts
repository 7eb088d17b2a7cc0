export { GatewayError, StoreUnavailableError, errors, type ErrorType } from './gateway-error.js';
export { openAIErrors, shapeABody } from './openai-errors.js';
export { newRequestId } from './request-id.js';
export { LINGER_MS } from './lingering-close.js';
export { anthropicErrors } from './anthropic-errors.js';
export { gatewayErrors, type GatewayErrorsOptions } from './gateway-errors.js';
