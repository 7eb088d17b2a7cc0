export {
  PROVIDER_KINDS,
  validateCatalog,
  validateModels,
  type CatalogModel,
  type ProviderConfig,
  type ProviderKind,
} from './catalog.js';
export { createProvider, type Provider, type ProviderRequest } from './provider.js';
export { openAIProvider } from './providers/openai.js';
export { anthropicProvider } from './providers/anthropic.js';
export { echoProvider } from './providers/echo.js';
export { listModels, type ListModelsOptions } from './list-models.js';
export { chatCompletions } from './chat-completions.js';
export { messages } from './messages.js';
export type { ModelEndpointOptions, ModelRequestState } from './model-endpoint.js';
