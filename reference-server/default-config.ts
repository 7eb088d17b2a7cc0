/**
 * The built-in configuration: the offline `echo` provider and its models, so that a fresh checkout
 * runs with no network and no credentials. A `GATEWAY_CONFIG` file replaces each top-level key.
 */
export const DEFAULT_GATEWAY_CONFIG = {
  keyPrefix: 'kmg',
  /** How long the server reuses a key lookup (revocations announced by the admin API and the CLI are seen at once). 0: no cache. */
  keyCacheSeconds: 5,
  sweep: { intervalSeconds: 300, orphanGraceSeconds: 3600 },
  providers: [{ id: 'local', kind: 'echo' }],
  models: [
    { id: 'echo-1', provider: 'local', upstreamModel: 'echo-1', created: 1_744_000_000 },
    { id: 'echo-2', provider: 'local', upstreamModel: 'echo-2', created: 1_744_000_000 },
  ],
};
