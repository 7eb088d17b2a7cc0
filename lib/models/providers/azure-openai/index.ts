import { z } from 'zod';
import { httpBaseUrl, parseOptions } from '../../../settings/schemas.js';
import type { Provider, ProviderAnswer, ProviderRequest } from '../../provider.js';
import { MAX_EMBEDDING_INPUTS } from '../../formats/embeddings/request.js';
import { callHeaders, httpUpstream, untilAborted, type CallHeaders, type HttpUpstream, type PostJson } from '../http.js';
import { openAIProviderOptions } from '../openai/index.js';
import { entraIdOptions, entraIdTokens, requireIdentityPackage, type AzureTokenCredential } from './entra-id.js';

export type { AzureAccessToken, AzureTokenCredential, EntraIdOptions } from './entra-id.js';

const API_VERSION = 'must be an API version such as 2024-10-21 or 2025-04-01-preview';
const ONE_CREDENTIAL = "needs exactly one credential: apiKey (a config file's apiKeyEnv), entraId or tokenCredential";

/**
 * The options of `azureOpenAIProvider()`: `id`; `baseURL`, the resource's endpoint
 * (`https://<resource>.openai.azure.com`, or a Foundry resource's `https://<resource>.services.ai.azure.com`);
 * `apiVersion` for the API with dated versions (absent: the v1 API); `endpoints` as `openAIProvider()`'s;
 * and one credential: `apiKey` (sent as `api-key`), `entraId` (a Microsoft Entra ID token from
 * `@azure/identity`'s credential it names) or, in code, `tokenCredential` (any `@azure/identity` credential).
 */
export const azureOpenAIProviderOptions = openAIProviderOptions
  .extend({
    baseURL: httpBaseUrl.refine((value) => new URL(value).search === '' && new URL(value).hash === '', { error: 'must have no query or fragment' }),
    apiVersion: z
      .string({ error: API_VERSION })
      .regex(/^[A-Za-z0-9.-]{1,40}$/, { error: API_VERSION })
      .optional(),
    entraId: entraIdOptions.optional(),
    tokenCredential: z
      .custom<AzureTokenCredential>((value) => typeof (value as Partial<AzureTokenCredential> | null)?.getToken === 'function', {
        error: 'must be a credential of @azure/identity (an object with getToken())',
      })
      .optional(),
  })
  .refine(({ apiKey, entraId, tokenCredential }) => [apiKey, entraId, tokenCredential].filter((given) => given !== undefined).length === 1, {
    error: ONE_CREDENTIAL,
  });

export type AzureOpenAIProviderOptions = z.input<typeof azureOpenAIProviderOptions>;

/**
 * Azure OpenAI and Microsoft Foundry, which speak OpenAI's formats: Chat Completions and Responses
 * pass through byte for byte, Messages is translated. With `apiVersion`, a model's calls go to its
 * deployment (the catalog's `upstreamModel`): `POST {baseURL}/openai/deployments/{deployment}/chat/completions?api-version=…`
 * and `/embeddings` the same way, and Responses to `POST {baseURL}/openai/responses?api-version=…`
 * (the deployment in the body's `model`, as Azure's reference has it); without, the v1 API:
 * `POST {baseURL}/openai/v1/chat/completions`, `/openai/v1/responses`, `/openai/v1/embeddings`, the
 * deployment in `model`. Embeddings take at most 2,048 inputs a call. Traces name it `azure.ai.openai`.
 * One pool of keep-alive connections, which `close()` closes.
 * @example azureOpenAIProvider({ id: 'azure', baseURL: 'https://my-resource.openai.azure.com', apiKey: process.env.AZURE_OPENAI_API_KEY })
 * @example azureOpenAIProvider({ id: 'azure', baseURL: 'https://my-resource.openai.azure.com', apiVersion: '2024-10-21', entraId: {} })
 */
export function azureOpenAIProvider(options: AzureOpenAIProviderOptions): Provider {
  const where = 'azureOpenAIProvider()';
  const {
    id,
    baseURL,
    apiVersion,
    apiKey,
    entraId,
    tokenCredential,
    endpoints = ['chat.completions', 'responses', 'embeddings'],
  } = parseOptions(azureOpenAIProviderOptions, options, where);
  if (entraId !== undefined || tokenCredential !== undefined) requireIdentityPackage(where);
  const upstream = httpUpstream(baseURL);
  const post =
    apiKey === undefined ? withToken(tokenCredential === undefined ? { entraId: entraId ?? {} } : { credential: tokenCredential }) : withApiKey(apiKey);
  const paths = apiVersion === undefined ? v1Paths(upstream) : versionedPaths(upstream, apiVersion);
  return {
    id,
    telemetry: upstream.telemetry('azure.ai.openai'),
    ...(endpoints.includes('chat.completions') && { chatCompletions: post(paths.chatCompletions) }),
    ...(endpoints.includes('responses') && { responses: post(paths.responses) }),
    ...(endpoints.includes('embeddings') && { embeddings: post(paths.embeddings), embeddingInputsPerCall: MAX_EMBEDDING_INPUTS }),
    close: upstream.close,
  };
}

type Paths = Record<'chatCompletions' | 'responses' | 'embeddings', (request: ProviderRequest) => PostJson>;

/** The v1 API: one path per operation, the deployment in the body. */
function v1Paths(upstream: HttpUpstream): Paths {
  const chat = upstream.endpoint('/openai/v1/chat/completions');
  const responses = upstream.endpoint('/openai/v1/responses');
  const embeddings = upstream.endpoint('/openai/v1/embeddings');
  return { chatCompletions: () => chat, responses: () => responses, embeddings: () => embeddings };
}

/** The dated API: a deployment's own path for Chat Completions and embeddings, one path for Responses. */
function versionedPaths(upstream: HttpUpstream, apiVersion: string): Paths {
  const query = `?api-version=${apiVersion}`;
  const responses = upstream.endpoint(`/openai/responses${query}`);
  return {
    chatCompletions: deploymentPath(upstream, (deployment) => `/openai/deployments/${deployment}/chat/completions${query}`),
    responses: () => responses,
    embeddings: deploymentPath(upstream, (deployment) => `/openai/deployments/${deployment}/embeddings${query}`),
  };
}

/** The endpoint of the deployment a request names in `model`, made once per deployment (the catalog's, so a few). */
function deploymentPath(upstream: HttpUpstream, path: (deployment: string) => string): (request: ProviderRequest) => PostJson {
  const made = new Map<string, PostJson>();
  return ({ body }) => {
    const deployment = String(body.model);
    let endpoint = made.get(deployment);
    if (endpoint === undefined) {
      endpoint = upstream.endpoint(path(encodeURIComponent(deployment)));
      made.set(deployment, endpoint);
    }
    return endpoint;
  };
}

type Send = (endpoint: (request: ProviderRequest) => PostJson) => (request: ProviderRequest) => Promise<ProviderAnswer>;

/** Calls with the `api-key` header, made once. */
function withApiKey(apiKey: string): Send {
  const headers = callHeaders({ 'api-key': apiKey });
  return (endpoint) => (request) => endpoint(request)(headers, request);
}

/** Calls with `Authorization: Bearer` and the credential's token, got within the call's time (its signal). */
function withToken(source: Parameters<typeof entraIdTokens>[0]): Send {
  const tokens = entraIdTokens(source);
  // Made again only when the token changes.
  let last: { token: string; headers: CallHeaders } | undefined;
  return (endpoint) => async (request) => {
    const token = await untilAborted(tokens(), request.signal);
    if (last?.token !== token) last = { token, headers: callHeaders({ authorization: `Bearer ${token}` }) };
    return endpoint(request)(last.headers, request);
  };
}
