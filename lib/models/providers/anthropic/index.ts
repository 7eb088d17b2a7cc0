import { parseOptions } from '../../../settings/schemas.js';
import type { Provider, ProviderRequest } from '../../provider.js';
import { callHeaders, httpProviderOptions, httpUpstream, type CallHeaders, type HttpProviderOptions, type PostJson } from '../http.js';

const DEFAULT_BASE_URL = 'https://api.anthropic.com';
/** Sent when the client sends no `anthropic-version` of its own. */
const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

/**
 * Anthropic's Messages API: `POST {baseURL}/v1/messages` and `POST {baseURL}/v1/messages/count_tokens`
 * (default base `https://api.anthropic.com`) with `x-api-key: <apiKey>` and the client's
 * `anthropic-version` (default `2023-06-01`) and `anthropic-beta`, over one pool of keep-alive
 * connections, which `close()` closes. It speaks Messages: calls to its models on
 * /v1/chat/completions and /v1/responses are translated to Messages.
 * @example anthropicProvider({ id: 'anthropic', apiKey: process.env.ANTHROPIC_API_KEY })
 */
export function anthropicProvider(options: HttpProviderOptions): Provider {
  const { id, baseURL = DEFAULT_BASE_URL, apiKey } = parseOptions(httpProviderOptions, options, 'anthropicProvider()');
  const upstream = httpUpstream(baseURL);
  const credentials: Record<string, string> = apiKey === undefined ? {} : { 'x-api-key': apiKey };
  // Made once for the calls that ask for nothing but the default version, per call for the others.
  const usual = callHeaders({ 'anthropic-version': DEFAULT_ANTHROPIC_VERSION, ...credentials });
  const headersOf = ({ headers }: ProviderRequest): CallHeaders => {
    const version = headers['anthropic-version'] ?? DEFAULT_ANTHROPIC_VERSION;
    const beta = headers['anthropic-beta'];
    if (version === DEFAULT_ANTHROPIC_VERSION && beta === undefined) return usual;
    return callHeaders({ 'anthropic-version': version, ...(beta === undefined ? {} : { 'anthropic-beta': beta }), ...credentials });
  };
  const post = (endpoint: PostJson) => (request: ProviderRequest) => endpoint(headersOf(request), request);
  return {
    id,
    telemetry: upstream.telemetry('anthropic'),
    messages: post(upstream.endpoint('/v1/messages')),
    countTokens: post(upstream.endpoint('/v1/messages/count_tokens')),
    close: upstream.close,
  };
}
