/**
 * The built-in configuration, which a `GATEWAY_CONFIG` file overrides key by key (the limits
 * default to api.md's): the offline echo models, so that a fresh checkout runs with no network
 * and no credentials.
 */
export const DEFAULT_GATEWAY_CONFIG = {
  keyPrefix: 'kmg',
  /**
   * How long the server reuses a key lookup, in seconds. A revocation or change made through the
   * admin API or the CLI is announced (Redis pub/sub, else a version row read every 250 ms) and
   * forgets the key at once; this bounds the rest (a change made in the database by hand, an
   * announcement that failed): 1, as decisions.md wants revocation to take effect in every process
   * within a second. 0: no cache.
   */
  keyCacheSeconds: 1,
  sweep: { intervalSeconds: 300, orphanGraceSeconds: 3600 },
  models: [
    // Offline: they cost nothing.
    { id: 'echo-1', provider: 'echo', created: 1_744_000_000, price: { input: 0, output: 0 } },
    { id: 'echo-2', provider: 'echo', created: 1_744_000_000, price: { input: 0, output: 0 } },
    { id: 'echo-embed-1', provider: 'echo', type: 'embeddings', created: 1_744_000_000, price: { input: 0, output: 0 } },
  ],
};

/** Always configured, unless the file names a provider `echo` of its own: a file may list only `models`. */
export const BUILTIN_PROVIDER = { id: 'echo', kind: 'echo' } as const;
