import { parseOptions } from '../../../settings/schemas.js';
import type { Provider } from '../../provider.js';
import { callHeaders, httpProviderOptions, httpUpstream, type HttpProviderOptions } from '../http.js';

const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

/**
 * Any OpenAI-compatible API: `POST {baseURL}/chat/completions` and `POST {baseURL}/responses`
 * (default base `https://api.openai.com/v1`) with `Authorization: Bearer <apiKey>` (left out when
 * no `apiKey` is given, for local servers that need none), over one pool of keep-alive
 * connections, which `close()` closes. It speaks Chat Completions and Responses: its models are
 * not served on /v1/messages.
 * @example openAIProvider({ id: 'openai', apiKey: process.env.OPENAI_API_KEY })
 */
export function openAIProvider(options: HttpProviderOptions): Provider {
  const { id, baseURL = DEFAULT_BASE_URL, apiKey } = parseOptions(httpProviderOptions, options, 'openAIProvider()');
  const upstream = httpUpstream(baseURL);
  const chat = upstream.endpoint('/chat/completions');
  const responses = upstream.endpoint('/responses');
  const headers = callHeaders(apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` });
  return {
    id,
    telemetry: upstream.telemetry('openai'),
    chatCompletions: (request) => chat(headers, request),
    responses: (request) => responses(headers, request),
    close: upstream.close,
  };
}
