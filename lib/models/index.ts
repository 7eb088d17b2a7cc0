/**
 * `koa-model-gateway/models`: the models API (`modelsRouter()`, or each endpoint on its own), the
 * `Provider` interface, the built-in providers and their registry, routing and metering
 * (`meterModelCalls()`), and the format types for code that reads answers. Importing it loads the
 * built-in providers (undici).
 */
export type { CatalogModel } from './catalog.js';
export type {
  EmbedAnswer,
  EmbedRequest,
  NeutralCall,
  NeutralProtocol,
  Provider,
  ProviderAnswer,
  ProviderEndpoint,
  ProviderRequest,
  ProviderTelemetry,
} from './provider.js';
export { UpstreamStatusError } from './provider.js';
export type { Answer, FinishReason, Message, Part, Request, StreamPart, Tool, ToolChoice, Usage } from './formats/neutral.js';
export { untranslatable } from './formats/neutral.js';
export type { ReadRequest } from './formats/wire-format.js';
export type { AttemptStart, AttemptTrace, ModelRequestState, RequestTracing } from '../state.js';
export { createProvider, providerRegistry, type ProviderConfig, type ProviderFactory, type ProviderKind, type ProviderRegistry } from './providers/registry.js';
export { openAIProvider, type OpenAIProviderOptions } from './providers/openai/index.js';
export { anthropicProvider } from './providers/anthropic/index.js';
export {
  azureOpenAIProvider,
  type AzureOpenAIProviderOptions,
  type AzureAccessToken,
  type AzureTokenCredential,
  type EntraIdOptions,
} from './providers/azure-openai/index.js';

export { bedrockProvider, type BedrockProviderOptions } from './providers/bedrock/index.js';
export type { AwsCredentials, AwsCredentialSource } from './providers/bedrock/aws.js';
export { echoProvider, type EchoProviderOptions } from './providers/echo/index.js';
export { geminiProvider } from './providers/gemini/index.js';
export { vertexAnthropicProvider, vertexProvider, type TokenSource, type VertexProviderOptions } from './providers/vertex/index.js';
export type { HttpProviderOptions } from './providers/http.js';
export { listModels, type ListModelsOptions } from './list-models.js';
export { retrieveModel, type RetrieveModelOptions } from './retrieve-model.js';
export { chatCompletions } from './formats/chat-completions/endpoint.js';
export { responses } from './formats/responses/endpoint.js';
export { messages } from './formats/messages/endpoint.js';
export { countTokens } from './formats/messages/count-tokens.js';
export { embeddings } from './formats/embeddings/endpoint.js';
export { modelsRouter, type ModelsRouterOptions } from './models-router.js';
export { meterModelCalls, type MeterModelCallsOptions } from './meter-model-calls.js';
export type { ModelEndpointOptions } from './model-endpoint.js';
export type { EndpointFormat } from './endpoint-format.js';
export { upstreamStreamFailure, type AnswerFormat, type StreamedAnswer } from './answer.js';
export type { TokenUsage } from '../usage/token-usage.js';
export type { FileReferences } from './attachments.js';
export { DEFAULT_RETRY_STATUSES, type RoutingOptions } from './routing/routing-options.js';
export { cooldownLength, type CooldownPolicy, type CooldownStore } from './routing/cooldown-store.js';
export { AttemptFailedError } from './routing/attempt-failed.js';
export type { ResponseCache } from './cache/response-cache.js';
export type { ResponseCachingOptions, CacheOutcome } from './cache/response-caching.js';
export { cacheKey, IGNORED_FIELDS, CACHE_KEY_VERSION, type CacheKeyParts } from './cache/cache-key.js';
