import type { Middleware } from 'koa';
import { modelEndpoint, type ModelEndpointOptions } from '../../model-endpoint.js';
import { messagesFormat } from './index.js';

/**
 * `POST /v1/messages` in Anthropic's format, Shape B errors: put it behind `anthropicErrors()`,
 * `apiKey()` and `requireScope('messages:create')`. A model that is unknown or outside the key's
 * allowlist gets the same 404 `Model not found`; an allowed one is renamed to its `upstreamModel`
 * and sent to its provider with the provider's own credentials and the client's
 * `anthropic-version` and `anthropic-beta`. A block `{"type":"document","source":{"type":"file",
 * "file_id"}}` (needs `files:read` too) is sent as the stored PDF itself, a `base64`
 * `application/pdf` source titled with the file name. With `"stream": true` the upstream's events
 * pass through as they arrive; a failure after that is an `event: error`. Answers name the catalog
 * id; the key's limits are applied after the checks above (429 with `anthropic-ratelimit-*`). For
 * usage records and metrics, put `meterModelCalls()` before it (`modelsRouter()` does).
 * @example
 * router.post('/v1/messages', anthropicErrors(), apiKey({ store }), requireScope('messages:create'),
 *   messages({ catalog, providers, files, blobs }))
 */
export function messages(options: ModelEndpointOptions): Middleware {
  const handle = modelEndpoint(messagesFormat, options);
  return async function messages(ctx) {
    await handle(ctx);
  };
}
