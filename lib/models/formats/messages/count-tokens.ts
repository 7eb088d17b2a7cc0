import type { Middleware } from 'koa';
import { modelEndpoint, type ModelEndpointOptions } from '../../model-endpoint.js';
import { countTokensFormat } from './index.js';

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
  const handle = modelEndpoint(countTokensFormat, options);
  return async function countTokens(ctx) {
    await handle(ctx);
  };
}
