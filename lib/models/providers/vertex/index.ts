import type { Provider } from '../../provider.js';
import { callHeaders } from '../http.js';
import { geminiProtocol, type GeminiTransport } from '../gemini/protocol.js';
import { vertexApi, type VertexProviderOptions } from './api.js';
import { VERTEX_EMBEDDING_INPUTS_PER_CALL, vertexEmbed } from './embed.js';

export { vertexAnthropicProvider } from './anthropic.js';
export { vertexProviderOptions, type TokenSource, type VertexProviderOptions } from './api.js';

/**
 * Gemini on Google Cloud's Vertex AI: `POST {baseURL}/v1/projects/{project}/locations/{location}/publishers/google/models/{upstreamModel}:generateContent`
 * and `:streamGenerateContent?alt=sse` (embeddings by `:predict`), with an OAuth access token from `google-auth-library` (an
 * optional peer dependency: install it beside the gateway), over one pool of keep-alive
 * connections. It speaks the neutral representation, as `geminiProvider()` does. Traces name it
 * `gcp.vertex_ai`.
 * @example vertexProvider({ id: 'vertex', project: 'my-project', location: 'us-central1' })
 */
export function vertexProvider(options: VertexProviderOptions): Provider {
  const { id, upstream, models, authorized } = vertexApi(options, 'vertexProvider()');
  const { json, stream } = callHeaders({});
  const google = models('google');
  const transport: GeminiTransport = {
    async post(model, method, body, call) {
      const headers = await authorized(method.startsWith('stream') ? stream : json, call.signal);
      return upstream.post(`${google}/${encodeURIComponent(model)}:${method}`, headers, body, call);
    },
  };
  return {
    id,
    telemetry: upstream.telemetry('gcp.vertex_ai'),
    neutral: geminiProtocol(transport, 'Vertex AI'),
    embed: vertexEmbed(transport, 'Vertex AI'),
    embeddingInputsPerCall: VERTEX_EMBEDDING_INPUTS_PER_CALL,
    close: upstream.close,
  };
}
