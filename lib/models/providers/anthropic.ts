import type { ProviderConfig } from '../catalog.js';
import type { Provider } from '../provider.js';

const DEFAULT_BASE_URL = 'https://api.anthropic.com';
/** Sent when the client sends no `anthropic-version` of its own. */
const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

/**
 * Anthropic's Messages API: `POST {baseURL}/v1/messages` with `x-api-key: <apiKey>` and the
 * client's `anthropic-version` (default `2023-06-01`) and `anthropic-beta`. It speaks Messages
 * only: its models are not served on /v1/chat/completions.
 * @example anthropicProvider({ id: 'anthropic', apiKey: process.env.ANTHROPIC_API_KEY })
 */
export function anthropicProvider(config: Pick<ProviderConfig, 'id' | 'baseURL' | 'apiKey'>): Provider {
  const url = `${(config.baseURL ?? DEFAULT_BASE_URL).replace(/\/+$/, '')}/v1/messages`;
  const credentials: Record<string, string> = config.apiKey === undefined ? {} : { 'x-api-key': config.apiKey };
  return {
    id: config.id,
    messages: ({ body, headers, signal }) => {
      const beta = headers['anthropic-beta'];
      return fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: body.stream === true ? 'text/event-stream' : 'application/json',
          'anthropic-version': headers['anthropic-version'] ?? DEFAULT_ANTHROPIC_VERSION,
          ...(beta === undefined ? {} : { 'anthropic-beta': beta }),
          ...credentials,
        },
        body: JSON.stringify(body),
        signal,
      });
    },
  };
}
