import type { Middleware } from 'koa';
import { errorFormatter } from './error-formatter.js';
import type { GatewayError } from './gateway-error.js';

/** Anthropic's error type names, decided by status alone. */
function anthropicErrorType(status: number): string {
  switch (status) {
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 529:
      return 'overloaded_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

/** The Shape B body of `err`: `{ type: "error", error: { type, message }, request_id }`. */
export function shapeBBody(err: GatewayError, requestId: string) {
  return { type: 'error', error: { type: anthropicErrorType(err.status), message: err.message }, request_id: requestId };
}

/**
 * Shape B (Anthropic-style) errors: `{ type: "error", error: { type, message }, request_id }`,
 * and a `request-id` header equal to `request_id` on every response.
 * @example router.post('/v1/messages', anthropicErrors(), apiKey({ store }), handler)
 */
export function anthropicErrors(): Middleware {
  return errorFormatter(
    {
      header: 'request-id',
      render: shapeBBody,
    },
    'anthropicErrors',
  );
}
