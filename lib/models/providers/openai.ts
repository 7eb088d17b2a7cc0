import type { ProviderConfig } from '../catalog.js';
import type { Provider } from '../provider.js';
import { postJson } from './post-json.js';

const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

/**
 * Any OpenAI-compatible API: `POST {baseURL}/chat/completions` with `Authorization: Bearer <apiKey>`
 * (left out when no `apiKey` is configured, for local servers that need none). It speaks Chat
 * Completions only: its models are not served on /v1/messages.
 * @example openAIProvider({ id: 'openai', baseURL: 'https://api.openai.com/v1', apiKey: process.env.OPENAI_API_KEY })
 */
export function openAIProvider(config: Pick<ProviderConfig, 'id' | 'baseURL' | 'apiKey'>): Provider {
  const url = `${(config.baseURL ?? DEFAULT_BASE_URL).replace(/\/+$/, '')}/chat/completions`;
  const credentials: Record<string, string> = config.apiKey === undefined ? {} : { authorization: `Bearer ${config.apiKey}` };
  return {
    id: config.id,
    chatCompletions: (request) => postJson(url, credentials, request),
  };
}
