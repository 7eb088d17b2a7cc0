export { GatewayError, StoreUnavailableError, errors, type ErrorType } from './gateway-error.js';
export { openAIErrors, shapeABody } from './openai-errors.js';
export { anthropicErrors, anthropicErrorType, shapeBBody } from './anthropic-errors.js';
export { toGatewayError, isUnreachable } from './to-gateway-error.js';
export { newRequestId, randomAlphanumeric } from './request-id.js';
