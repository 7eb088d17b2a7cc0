// The resolution hooks of hide-packages.ts, run on Node's hooks thread.
import type { InitializeHook, ResolveHook } from 'node:module';

let hidden = new Set<string>();

export const initialize: InitializeHook<{ hidden: string[] }> = (data) => {
  hidden = new Set(data.hidden);
};

/** A hidden package (any file in it), or a hidden subpath export (`pkg/sub`), fails as a package that is not installed does. */
export const resolve: ResolveHook = (specifier, context, nextResolve) => {
  const name = specifier.startsWith('@') ? specifier.split('/', 2).join('/') : specifier.split('/', 1)[0];
  if (hidden.has(specifier) || (name !== undefined && hidden.has(name))) {
    throw Object.assign(new Error(`Cannot find package '${specifier}' (hidden by the test)`), { code: 'ERR_MODULE_NOT_FOUND' });
  }
  return nextResolve(specifier, context);
};
