/**
 * The built-in configuration, which a `GATEWAY_CONFIG` file overrides key by key (the limits
 * default to api.md's): the offline echo models, so that a fresh checkout runs with no network
 * and no credentials.
 */
export const DEFAULT_GATEWAY_CONFIG = {
  keyPrefix: 'kmg',
  /**
   * How long the server reuses a key lookup; also the longest a `keys revoke` takes to be seen:
   * 1, as decisions.md wants revocation to take effect in every process within a second. 0: no cache.
   */
  keyCacheSeconds: 1,
  sweep: { intervalSeconds: 300, orphanGraceSeconds: 3600 },
  models: [
    { id: 'echo-1', provider: 'echo', created: 1_744_000_000 },
    { id: 'echo-2', provider: 'echo', created: 1_744_000_000 },
  ],
};

/** Always configured, unless the file names a provider `echo` of its own: a file may list only `models`. */
export const BUILTIN_PROVIDER = { id: 'echo', kind: 'echo' } as const;
