import type { Context, Middleware } from 'koa';
import { errors } from '../errors/gateway-error.js';
import { extractApiKey } from './extract-api-key.js';
import type { KeyStore } from './key-store.js';
import type { KeyUseRecorder } from './key-use-recorder.js';
import { hashApiKey, keyStatus } from './keys.js';
import type { VerifiedKey } from '../state.js';

export interface ApiKeyOptions {
  store: KeyStore;
  /** Where the key is read from. Default: `extractApiKey(ctx.headers)` (x-api-key, then Bearer). */
  getKey?: (ctx: Context) => string | undefined;
  /** The clock for expiry, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
  /** Notes each verified key's use, for its `lastUsedAt` (`keyUseRecorder`); the request never waits for it. Default: none. */
  uses?: Pick<KeyUseRecorder, 'record'>;
}

/**
 * Verifies the request's API key against the store by its SHA-256 hash and puts the key on
 * `ctx.state.apiKey`. No key, a malformed header, an unknown, revoked or expired key: 401.
 * @example app.use(apiKey({ store: new MemoryKeyStore() }))
 */
export function apiKey(options: ApiKeyOptions): Middleware {
  const store = options?.store;
  if (typeof store?.findByHash !== 'function') throw new TypeError('koa-model-gateway: apiKey() needs a KeyStore as `store`');
  const getKey = options.getKey ?? ((ctx: Context) => extractApiKey(ctx.headers));
  const nowMs = options.nowMs ?? Date.now;
  const { uses } = options;
  if (uses !== undefined && typeof uses.record !== 'function') throw new TypeError('koa-model-gateway: apiKey() `uses` must be a KeyUseRecorder');
  return async function apiKey(ctx, next) {
    const key = getKey(ctx);
    if (key === undefined) throw errors.invalidApiKey();
    const record = await store.findByHash(hashApiKey(key));
    if (!record || keyStatus(record, nowMs() / 1000) !== 'active') throw errors.invalidApiKey();
    uses?.record(record.id);
    ctx.state.apiKey = {
      id: record.id,
      account: record.account,
      scopes: record.scopes,
      models: record.models,
      ...(record.limits && { limits: record.limits }),
      ...(record.originalId !== undefined && { originalId: record.originalId }),
      ...(record.mcpTools && { mcpTools: record.mcpTools }),
      ...(record.cache && { cache: record.cache }),
    };
    return next();
  };
}

/**
 * The verified key, for handlers behind `apiKey()`.
 * @example router.get('/v1/whoami', (ctx) => { ctx.body = { account: verifiedKey(ctx).account } })
 */
export function verifiedKey(ctx: Context): VerifiedKey {
  const key = ctx.state.apiKey;
  if (!key) throw new Error('koa-model-gateway: apiKey() must run before this middleware');
  return key;
}
