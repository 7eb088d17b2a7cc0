import type { z } from 'zod';
import type { Provider } from '../provider.js';
import { anthropicProvider } from './anthropic/index.js';
import { echoProvider, echoProviderOptions } from './echo/index.js';
import { httpProviderOptions } from './http.js';
import { openAIProvider, openAIProviderOptions } from './openai/index.js';

/** How a provider of one kind is made from settings: the schema of its options, and its factory. */
export interface ProviderFactory<Options extends z.ZodObject = z.ZodObject> {
  options: Options;
  create(options: z.input<Options>): Provider;
}

/**
 * The built-in provider kinds, by the name a configuration gives as `kind`. The reference
 * server's config file is checked against these schemas; a gateway of your own may extend the
 * registry with its kinds, or pass `Provider` objects to the handlers without one.
 * @example const provider = providerRegistry.openai.create({ id: 'openai', apiKey: process.env.OPENAI_API_KEY })
 */
export const providerRegistry = {
  openai: { options: openAIProviderOptions, create: openAIProvider },
  anthropic: { options: httpProviderOptions, create: anthropicProvider },
  echo: { options: echoProviderOptions, create: echoProvider },
} satisfies Record<string, ProviderFactory>;

export type ProviderKind = keyof typeof providerRegistry;

/** A provider as a configuration describes it: its `kind` and that kind's options. */
export type ProviderConfig = {
  [Kind in ProviderKind]: { kind: Kind } & z.input<(typeof providerRegistry)[Kind]['options']>;
}[ProviderKind];

/**
 * The provider a configuration describes, made by its kind's factory (which checks the options).
 * @example const provider = createProvider({ kind: 'openai', id: 'openai', apiKey: process.env.OPENAI_API_KEY })
 */
export function createProvider(config: ProviderConfig): Provider {
  const { kind, ...options } = config;
  if (!Object.hasOwn(providerRegistry, kind)) {
    throw new TypeError(`koa-model-gateway: createProvider(): kind must be one of ${Object.keys(providerRegistry).join(', ')}`);
  }
  const factory: ProviderFactory = providerRegistry[kind];
  return factory.create(options);
}
