import type { ProviderConfig } from './catalog.js';
import { anthropicProvider } from './providers/anthropic.js';
import { echoProvider } from './providers/echo.js';
import { openAIProvider } from './providers/openai.js';

/** What the handlers hand a provider. */
export interface ProviderRequest {
  /** The body in the endpoint's own format, `model` already the upstream's name and attached files inlined. */
  body: Record<string, unknown>;
  /** Client headers meant for the upstream (`anthropic-version`, `anthropic-beta`), lower-case, when sent. */
  headers: Readonly<Record<string, string>>;
  /** Aborted when the upstream is too slow or the client goes away. */
  signal: AbortSignal;
}

/**
 * An upstream as the handlers see it: one method per endpoint format it speaks, each answering
 * with the upstream's own HTTP response (JSON, or server-sent events when `body.stream` is true).
 * A provider leaves out the endpoints it does not speak.
 */
export interface Provider {
  readonly id: string;
  chatCompletions?(request: ProviderRequest): Promise<Response>;
  messages?(request: ProviderRequest): Promise<Response>;
}

/**
 * The adapter for a provider configuration (checked by `validateCatalog`).
 * @example const provider = createProvider({ id: 'openai', kind: 'openai', apiKey: process.env.OPENAI_API_KEY })
 */
export function createProvider(config: ProviderConfig): Provider {
  switch (config.kind) {
    case 'openai':
      return openAIProvider(config);
    case 'anthropic':
      return anthropicProvider(config);
    case 'echo':
      return echoProvider(config);
  }
}
