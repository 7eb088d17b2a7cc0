import type { z } from 'zod';
import type { Provider } from '../provider.js';
import { anthropicProvider } from './anthropic/index.js';
import { azureOpenAIProvider, azureOpenAIProviderOptions } from './azure-openai/index.js';
import { bedrockProvider, bedrockProviderOptions } from './bedrock/index.js';
import { echoProvider, echoProviderOptions } from './echo/index.js';
import { geminiProvider } from './gemini/index.js';
import { httpProviderOptions } from './http.js';
import { openAIProvider, openAIProviderOptions } from './openai/index.js';
import { vertexAnthropicProvider, vertexProvider, vertexProviderOptions } from './vertex/index.js';

/** How a provider of one kind is made from settings: the schema of its options, and its factory. */
export interface ProviderFactory<Options extends z.ZodObject = z.ZodObject> {
  options: Options;
  create(options: z.input<Options>): Provider;
}

/**
 * Provider kinds by the name a configuration gives as `kind`. A registry is a plain object: extend
 * one by spreading it, `{ ...providerRegistry, mine: { options, create } }`.
 */
export type ProviderRegistry = Readonly<Record<string, ProviderFactory>>;

/**
 * The built-in provider kinds, by the name a configuration gives as `kind`. The reference
 * server's config file is checked against these schemas unless it is given a registry of its own;
 * a gateway of your own may extend the registry with its kinds, or pass `Provider` objects to the
 * handlers without one.
 * @example
 * const provider = providerRegistry.openai.create({ id: 'openai', apiKey: process.env.OPENAI_API_KEY });
 * const kinds = { ...providerRegistry, cohere: { options: cohereOptions, create: cohereProvider } } satisfies ProviderRegistry;
 */
export const providerRegistry = {
  openai: { options: openAIProviderOptions, create: openAIProvider },
  anthropic: { options: httpProviderOptions, create: anthropicProvider },
  echo: { options: echoProviderOptions, create: echoProvider },
  'azure-openai': { options: azureOpenAIProviderOptions, create: azureOpenAIProvider },
  gemini: { options: httpProviderOptions, create: geminiProvider },
  vertex: { options: vertexProviderOptions, create: vertexProvider },
  'vertex-anthropic': { options: vertexProviderOptions, create: vertexAnthropicProvider },
  bedrock: { options: bedrockProviderOptions, create: bedrockProvider },
} satisfies ProviderRegistry;

export type ProviderKind = keyof typeof providerRegistry;

/** A provider as a configuration describes it: its `kind` (one of `Registry`'s) and that kind's options. */
export type ProviderConfig<Registry extends ProviderRegistry = typeof providerRegistry> = {
  [Kind in keyof Registry & string]: { kind: Kind } & z.input<Registry[Kind]['options']>;
}[keyof Registry & string];

/**
 * The provider a configuration describes, made by its kind's factory in `registry` (default: the
 * built-in kinds), which checks the options.
 * @example
 * const provider = createProvider({ kind: 'openai', id: 'openai', apiKey: process.env.OPENAI_API_KEY });
 * const mine = createProvider({ kind: 'cohere', id: 'cohere' }, { ...providerRegistry, cohere: cohereKind });
 */
export function createProvider<Registry extends ProviderRegistry = typeof providerRegistry>(config: ProviderConfig<Registry>, registry?: Registry): Provider {
  const kinds: ProviderRegistry = registry ?? providerRegistry;
  const { kind, ...options } = config;
  const factory = Object.hasOwn(kinds, kind) ? kinds[kind] : undefined;
  if (factory === undefined) {
    throw new TypeError(`koa-model-gateway: createProvider(): kind must be one of ${Object.keys(kinds).join(', ')}`);
  }
  return factory.create(options);
}
