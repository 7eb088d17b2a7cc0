import type { Middleware } from 'koa';
import { modelEndpoint, type ModelEndpointOptions } from '../../model-endpoint.js';
import { responsesFormat } from './index.js';

export { RESPONSE_EVENTS, findResponseObject, responseUsage } from './answer-format.js';

/**
 * `POST /v1/responses` in OpenAI's Responses format, Shape A errors: put it behind `openAIErrors()`,
 * `apiKey()` and `requireScope('responses:create')`. The allowlist policy of Chat Completions
 * (outside the list: 403 `Model '<id>' is not allowed for this API key`; not in the catalog: 404
 * `The model '<id>' does not exist`); a model whose provider has no `responses` method is translated to a format it speaks. An
 * input part `{"type":"input_file","file_id"}` (needs `files:read` too) is sent as the stored PDF
 * itself: `{"type":"input_file","filename","file_data":"data:application/pdf;base64,..."}`. With
 * `"stream": true` the upstream's events pass through as they arrive; a failure after that is an
 * `event: error`. Answers name the catalog id; the key's limits are applied after the checks above
 * (429 with `x-ratelimit-*`). For usage records and metrics, put `meterModelCalls()` before it
 * (`modelsRouter()` does).
 * @example
 * router.post('/v1/responses', requireScope('responses:create'),
 *   responses({ catalog, providers, files, blobs }))
 */
export function responses(options: ModelEndpointOptions): Middleware {
  const handle = modelEndpoint(responsesFormat, options);
  return async function responses(ctx) {
    await handle(ctx);
  };
}
