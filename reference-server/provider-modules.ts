import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { providerRegistry, type ProviderFactory, type ProviderRegistry } from 'koa-model-gateway/models';
import { ConfigError } from './config-error.js';

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;

/** An entry of a module's `providerKinds`: a zod object schema of the options, and a factory. */
function isProviderFactory(value: unknown): value is ProviderFactory {
  return (
    isObject(value) &&
    isObject(value.options) &&
    typeof value.options.safeParse === 'function' &&
    isObject(value.options.shape) &&
    typeof value.create === 'function'
  );
}

/** A relative or absolute path is the config file's neighbour; anything else a package, as `import` finds it. */
function moduleUrl(specifier: string, configDir: string): string {
  if (isAbsolute(specifier) || specifier.startsWith('./') || specifier.startsWith('../')) return pathToFileURL(resolve(configDir, specifier)).href;
  return specifier;
}

/**
 * lib's built-in provider kinds and those of `specifiers` (the config file's `providerModules`),
 * each module exporting `providerKinds`: `{ <kind>: { options, create } }`, as lib's
 * `providerRegistry` is. A module that cannot be imported, exports no such object, or defines a
 * kind already defined is a `ConfigError`.
 * @example const kinds = await importProviderKinds(['./providers/cohere.js', 'kmg-provider-mistral'], '/etc/gateway')
 */
export async function importProviderKinds(specifiers: readonly string[], configDir: string): Promise<ProviderRegistry> {
  const kinds: Record<string, ProviderFactory> = { ...providerRegistry };
  for (const specifier of specifiers) {
    let exported: Record<string, unknown>;
    try {
      exported = (await import(moduleUrl(specifier, configDir))) as Record<string, unknown>;
    } catch (err) {
      const reason = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));
      throw new ConfigError(`providerModules: cannot import '${specifier}' (${reason})`);
    }
    const moduleKinds = exported.providerKinds;
    if (!isObject(moduleKinds)) throw new ConfigError(`providerModules: '${specifier}' must export providerKinds, an object of { options, create } by kind`);
    for (const [kind, factory] of Object.entries(moduleKinds)) {
      if (!isProviderFactory(factory))
        throw new ConfigError(`providerModules: '${specifier}': providerKinds.${kind} must be { options (a zod object), create }`);
      if (Object.hasOwn(kinds, kind)) throw new ConfigError(`providerModules: '${specifier}' defines the provider kind '${kind}', which is already defined`);
      kinds[kind] = factory;
    }
  }
  return kinds;
}
