export { GatewayError, StoreUnavailableError, errors, type ErrorType } from './gateway-error.js';
export { openAIErrors } from './openai-errors.js';
export { anthropicErrors } from './anthropic-errors.js';
export { gatewayErrors, type GatewayErrorsOptions } from './gateway-errors.js';
