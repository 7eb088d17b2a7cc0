import type { Middleware } from 'koa';
import { modelEndpoint, type ModelEndpointOptions } from '../../model-endpoint.js';
import { chatCompletionsFormat } from './index.js';

/**
 * `POST /v1/chat/completions` in OpenAI's format, Shape A errors: put it behind `openAIErrors()`,
 * `apiKey()` and `requireScope('chat:completions')`. The model is looked up in `catalog` through the
 * key's allowlist (outside it: 403 `Model '<id>' is not allowed for this API key`; not in the
 * catalog: 404 `The model '<id>' does not exist`), renamed to its `upstreamModel` and sent to its
 * provider with the provider's own credentials. A content part `{"type":"file","file":{"file_id"}}`
 * (needs `files:read` too) is sent as the stored PDF itself: `{"type":"file","file":{"filename",
 * "file_data":"data:application/pdf;base64,..."}}`. With `"stream": true` the upstream's events
 * pass through as they arrive; a failure after that is a `data: {"error":{...}}` event. Answers
 * name the catalog id; the key's limits are applied after the checks above (429 with `x-ratelimit-*`).
 * For usage records and metrics, put `meterModelCalls()` before it (`modelsRouter()` does).
 * @example
 * router.post('/v1/chat/completions', requireScope('chat:completions'),
 *   chatCompletions({ catalog, providers, files, blobs }))
 */
export function chatCompletions(options: ModelEndpointOptions): Middleware {
  const handle = modelEndpoint(chatCompletionsFormat, options);
  return async function chatCompletions(ctx) {
    await handle(ctx);
  };
}
