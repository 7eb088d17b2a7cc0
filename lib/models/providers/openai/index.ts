import { z } from 'zod';
import { parseOptions } from '../../../settings/schemas.js';
import type { Provider } from '../../provider.js';
import { MAX_EMBEDDING_INPUTS } from '../../formats/embeddings/request.js';
import { callHeaders, httpProviderOptions, httpUpstream } from '../http.js';

const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

const ENDPOINTS = ['chat.completions', 'responses', 'embeddings'] as const;
const NAMES = ENDPOINTS.map((name) => `'${name}'`).join(', ');
const ENDPOINT_LIST = `must be a non-empty list of distinct endpoints among ${NAMES}`;
const ENDPOINT_NAME = `must be one of ${NAMES}`;

/**
 * The options of `openAIProvider()`: those of every HTTP provider, and `endpoints`, the APIs its
 * upstream has (`'chat.completions'`, `'responses'`, `'embeddings'`; default all three). Many OpenAI-compatible
 * servers (vLLM, Ollama, llama.cpp) have Chat Completions only: `["chat.completions"]`.
 */
export const openAIProviderOptions = httpProviderOptions.extend({
  endpoints: z
    .array(z.enum(ENDPOINTS, { error: ENDPOINT_NAME }), { error: ENDPOINT_LIST })
    .min(1, { error: ENDPOINT_LIST })
    .refine((list) => new Set(list).size === list.length, { error: ENDPOINT_LIST })
    .optional(),
});

export type OpenAIProviderOptions = z.input<typeof openAIProviderOptions>;

/**
 * Any OpenAI-compatible API: `POST {baseURL}/chat/completions`, `POST {baseURL}/responses` and
 * `POST {baseURL}/embeddings` (at most 2,048 inputs a call, as OpenAI's; default base
 * `https://api.openai.com/v1`) with `Authorization: Bearer <apiKey>` (left out when no `apiKey` is given, for local servers that need none), over one pool of keep-alive
 * connections, which `close()` closes. It speaks the `endpoints` its upstream has (default all);
 * calls in another format (/v1/messages, and /v1/responses to an upstream without it) are
 * translated to one of them.
 * @example openAIProvider({ id: 'openai', apiKey: process.env.OPENAI_API_KEY })
 * @example openAIProvider({ id: 'vllm', baseURL: 'http://vllm.internal:8000/v1', endpoints: ['chat.completions'] })
 */
export function openAIProvider(options: OpenAIProviderOptions): Provider {
  const { id, baseURL = DEFAULT_BASE_URL, apiKey, endpoints = ENDPOINTS } = parseOptions(openAIProviderOptions, options, 'openAIProvider()');
  const upstream = httpUpstream(baseURL);
  const chat = upstream.endpoint('/chat/completions');
  const responses = upstream.endpoint('/responses');
  const embeddings = upstream.endpoint('/embeddings');
  const headers = callHeaders(apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` });
  return {
    id,
    telemetry: upstream.telemetry('openai'),
    ...(endpoints.includes('chat.completions') && { chatCompletions: (request) => chat(headers, request) }),
    ...(endpoints.includes('responses') && { responses: (request) => responses(headers, request) }),
    ...(endpoints.includes('embeddings') && { embeddings: (request) => embeddings(headers, request), embeddingInputsPerCall: MAX_EMBEDDING_INPUTS }),
    close: upstream.close,
  };
}
