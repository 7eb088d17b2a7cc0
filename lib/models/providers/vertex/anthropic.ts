import type { Provider, ProviderRequest } from '../../provider.js';
import { callHeaders } from '../http.js';
import { vertexApi, type VertexProviderOptions } from './api.js';

/** The version of the Messages API Vertex AI takes, in the body instead of the `anthropic-version` header. */
const VERTEX_ANTHROPIC_VERSION = 'vertex-2023-10-16';

/**
 * Anthropic's Claude models on Google Cloud's Vertex AI: the Messages API at
 * `POST {baseURL}/v1/projects/{project}/locations/{location}/publishers/anthropic/models/{upstreamModel}:rawPredict`
 * (`:streamRawPredict` for a stream), the body without `model` and with `anthropic_version:
 * "vertex-2023-10-16"`, and count_tokens at `.../models/count-tokens:rawPredict` (the model in the
 * body); the client's `anthropic-beta` passed on. Its options and credentials are `vertexProvider()`'s.
 * It speaks Messages: calls on /v1/chat/completions and /v1/responses are translated to it. Traces
 * name it `gcp.vertex_ai`.
 * @example vertexAnthropicProvider({ id: 'vertex-claude', project: 'my-project', location: 'us-east5' })
 */
export function vertexAnthropicProvider(options: VertexProviderOptions): Provider {
  const { id, upstream, models, authorized } = vertexApi(options, 'vertexAnthropicProvider()');
  const { json, stream } = callHeaders({});
  const anthropic = models('anthropic');
  const post = async (path: string, body: Record<string, unknown>, request: ProviderRequest) => {
    const beta = request.headers['anthropic-beta'];
    const kind = body.stream === true ? stream : json;
    const headers = await authorized(beta === undefined ? kind : { ...kind, 'anthropic-beta': beta }, request.signal);
    return upstream.post(path, headers, { ...body, anthropic_version: VERTEX_ANTHROPIC_VERSION }, request);
  };
  return {
    id,
    telemetry: upstream.telemetry('gcp.vertex_ai'),
    messages(request) {
      // Vertex AI names the model in the path, and refuses it in the body.
      const { model, ...body } = request.body;
      const method = body.stream === true ? 'streamRawPredict' : 'rawPredict';
      return post(`${anthropic}/${encodeURIComponent(String(model))}:${method}`, body, request);
    },
    countTokens: (request) => post(`${anthropic}/count-tokens:rawPredict`, request.body, request),
    close: upstream.close,
  };
}
