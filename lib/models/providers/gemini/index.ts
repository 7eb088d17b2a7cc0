import { parseOptions } from '../../../settings/schemas.js';
import type { Provider } from '../../provider.js';
import { callHeaders, httpProviderOptions, httpUpstream, type HttpProviderOptions } from '../http.js';
import { GEMINI_EMBEDDING_INPUTS_PER_CALL, geminiEmbed, geminiProtocol, type GeminiTransport } from './protocol.js';

const DEFAULT_BASE_URL = 'https://generativelanguage.googleapis.com';

/**
 * Google AI Studio's Gemini API: `POST {baseURL}/v1beta/models/{upstreamModel}:generateContent`,
 * `:streamGenerateContent?alt=sse` and `:batchEmbedContents` (default base
 * `https://generativelanguage.googleapis.com`) with `x-goog-api-key: <apiKey>`, over one pool of
 * keep-alive connections, which `close()` closes. It speaks the neutral representation: every
 * client format reaches its models (lib/models/providers/gemini/request.ts says what is carried).
 * Traces name it `gcp.gemini`.
 * @example geminiProvider({ id: 'gemini', apiKey: process.env.GEMINI_API_KEY })
 */
export function geminiProvider(options: HttpProviderOptions): Provider {
  const { id, baseURL = DEFAULT_BASE_URL, apiKey } = parseOptions(httpProviderOptions, options, 'geminiProvider()');
  const upstream = httpUpstream(baseURL);
  const { json, stream } = callHeaders(apiKey === undefined ? {} : { 'x-goog-api-key': apiKey });
  const transport: GeminiTransport = {
    post: (model, method, body, call) =>
      upstream.post(`/v1beta/models/${encodeURIComponent(model)}:${method}`, method.startsWith('stream') ? stream : json, body, call),
  };
  return {
    id,
    telemetry: upstream.telemetry('gcp.gemini'),
    neutral: geminiProtocol(transport, 'Gemini'),
    embed: geminiEmbed(transport, 'Gemini'),
    embeddingInputsPerCall: GEMINI_EMBEDDING_INPUTS_PER_CALL,
    close: upstream.close,
  };
}
