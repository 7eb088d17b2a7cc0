import { parseOptions } from '../../../settings/schemas.js';
import type { Provider, ProviderRequest } from '../../provider.js';
import { endpointUrl, httpProviderOptions, postJson, type HttpProviderOptions } from '../http.js';

const DEFAULT_BASE_URL = 'https://api.anthropic.com';
/** Sent when the client sends no `anthropic-version` of its own. */
const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

/**
 * Anthropic's Messages API: `POST {baseURL}/v1/messages` and `POST {baseURL}/v1/messages/count_tokens`
 * (default base `https://api.anthropic.com`) with `x-api-key: <apiKey>` and the client's
 * `anthropic-version` (default `2023-06-01`) and `anthropic-beta`. It speaks Messages only: its
 * models are not served on /v1/chat/completions or /v1/responses.
 * @example anthropicProvider({ id: 'anthropic', apiKey: process.env.ANTHROPIC_API_KEY })
 */
export function anthropicProvider(options: HttpProviderOptions): Provider {
  const { id, baseURL = DEFAULT_BASE_URL, apiKey } = parseOptions(httpProviderOptions, options, 'anthropicProvider()');
  const messagesUrl = endpointUrl(baseURL, '/v1/messages');
  const countTokensUrl = endpointUrl(baseURL, '/v1/messages/count_tokens');
  const credentials: Record<string, string> = apiKey === undefined ? {} : { 'x-api-key': apiKey };
  const post = (url: string, request: ProviderRequest) => {
    const beta = request.headers['anthropic-beta'];
    const headers = {
      'anthropic-version': request.headers['anthropic-version'] ?? DEFAULT_ANTHROPIC_VERSION,
      ...(beta === undefined ? {} : { 'anthropic-beta': beta }),
      ...credentials,
    };
    return postJson(url, headers, request);
  };
  return {
    id,
    messages: (request) => post(messagesUrl, request),
    countTokens: (request) => post(countTokensUrl, request),
  };
}
