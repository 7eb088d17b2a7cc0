import type { Middleware } from 'koa';
import { modelEndpoint, type ModelEndpointOptions } from '../../model-endpoint.js';
import { embeddingsFormat } from './index.js';

/**
 * `POST /v1/embeddings` in OpenAI's format, Shape A errors: put it behind `openAIErrors()`,
 * `apiKey()` and `requireScope('embeddings:create')`. `input` is a string, an array of strings,
 * an array of token ids or an array of token arrays (at most 2,048 items); `encoding_format`
 * `float` (default) or `base64` (little-endian float32, as the openai SDK asks by default),
 * `dimensions` and `user` as OpenAI takes them. Only catalog models of `type: "embeddings"` are
 * served (another is a 400 naming it); the allowlist, limits, budgets, routing and answers naming
 * the catalog id are those of the chat endpoints. A provider with OpenAI's API gets the body as it
 * is; one with a neutral `embed()`, or a batch over its `embeddingInputsPerCall`, is called in
 * runs, the answers joined in order, usage summed. For usage records and metrics, put
 * `meterModelCalls()` before it (`modelsRouter()` does).
 * @example
 * router.post('/v1/embeddings', requireScope('embeddings:create'), embeddings({ catalog, providers }))
 */
export function embeddings(options: ModelEndpointOptions): Middleware {
  const handle = modelEndpoint(embeddingsFormat, options);
  return async function embeddings(ctx) {
    await handle(ctx);
  };
}
