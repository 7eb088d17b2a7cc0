import type { Middleware } from 'koa';
import { errors } from '../../../errors/gateway-error.js';
import { checkMessages } from '../wire-format.js';
import { MESSAGES } from './endpoint.js';
import type { EndpointFormat } from '../../endpoint-format.js';
import { modelEndpoint, type ModelEndpointOptions } from '../../model-endpoint.js';

// A Messages body, counted rather than answered: the same allowlist policy and file references.
const COUNT_TOKENS: EndpointFormat = {
  ...MESSAGES,
  endpoint: 'countTokens',
  // A count needs no output limit.
  checkBody: (body) => checkMessages(body.messages),
  unsupported: (model) =>
    errors.invalidRequest(`The model '${model}' has no token counting: its provider neither counts tokens nor speaks a format to estimate them for`),
};

/**
 * `POST /v1/messages/count_tokens` in Anthropic's format, Shape B errors: put it behind
 * `anthropicErrors()`, `apiKey()` and `requireScope('messages:create')`. It reads a Messages body
 * as `messages()` does (an unknown or disallowed model is the same 404 `Model not found`; a
 * stored PDF attached by `file_id` is sent as the PDF itself) and answers the provider's
 * `{ "input_tokens" }`.
 * @example
 * router.post('/v1/messages/count_tokens', requireScope('messages:create'),
 *   countTokens({ catalog, providers, files, blobs }))
 */
export function countTokens(options: ModelEndpointOptions): Middleware {
  const handle = modelEndpoint(COUNT_TOKENS, options);
  return async function countTokens(ctx) {
    await handle(ctx);
  };
}
