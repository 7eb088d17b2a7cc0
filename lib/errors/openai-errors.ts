import type { Middleware } from 'koa';
import { errorFormatter } from './error-formatter.js';
import type { GatewayError } from './gateway-error.js';

/**
 * The Shape A body of `err`: `{ error: { message, type, param: null, code } }`, for an answer
 * written outside the middleware chain (a protocol error, an SSE error event).
 * @example socket.end(JSON.stringify(shapeABody(errors.invalidRequest('Malformed HTTP request'))))
 */
export function shapeABody(err: GatewayError) {
  return { error: { message: err.message, type: err.type, param: null, code: err.code } };
}

/**
 * Shape A (OpenAI-style) errors: `{ error: { message, type, param: null, code } }`, and an
 * `X-Request-Id` header on every response, success or error. Put it first in the chain.
 * @example app.use(openAIErrors())
 */
export function openAIErrors(): Middleware {
  return errorFormatter(
    {
      header: 'X-Request-Id',
      render: shapeABody,
    },
    'openAIErrors',
  );
}
