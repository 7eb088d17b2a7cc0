import type { Middleware } from 'koa';
import { errorFormatter } from './error-formatter.js';

/**
 * Shape A (OpenAI-style) errors: `{ error: { message, type, param: null, code } }`, and an
 * `X-Request-Id` header on every response, success or error. Put it first in the chain.
 * @example app.use(openAIErrors())
 */
export function openAIErrors(): Middleware {
  return errorFormatter(
    {
      header: 'X-Request-Id',
      render: (err) => ({ error: { message: err.message, type: err.type, param: null, code: err.code } }),
    },
    'openAIErrors',
  );
}
