import Router from '@koa/router';
import type { Context } from 'koa';
import type { KeyStore } from '../auth/key-store.js';
import { generateApiKey } from '../auth/keys.js';
import type { FileStore } from '../files/file-store.js';
import { DEFAULT_FILE_LIMITS } from '../files/file-limits.js';
import { DEFAULT_CREATION_LIMITS, type CreationUsage } from '../quota/creation-limits.js';
import type { UsageStore } from '../usage/usage-store.js';
import type { ResponseCache } from '../models/cache/response-cache.js';
import { listAccounts, showAccount, showUsage } from './account-routes.js';
import { purgeCache } from './cache-routes.js';
import { ADMIN_API_PATH, changedBy, verifiedAdmin } from './admin-auth.js';
import type { AuditChanges } from './audit-store.js';
import { keyFieldSchemas } from './key-fields.js';
import { createKey, listKeys, revokeKey, rotateKey, showCatalog, showKey, updateKey } from './key-routes.js';

/** What the admin API changed, and with which admin token: for the log of every change. */
export interface AdminChange {
  action: 'key.created' | 'key.updated' | 'key.revoked' | 'key.rotated' | 'session.opened' | 'session.closed' | 'cache.purged';
  /** The admin token that made the change; `null` when a person did, through the dashboard. */
  adminTokenId: string | null;
  /** The person who made the change through the dashboard. */
  userId?: string;
  keyId?: string;
  account?: string;
  /** `key.created`, `key.updated`: the fields the request set. */
  fields?: string[];
  /** `key.rotated`: the new key. */
  replacementId?: string;
  /** `key.updated`: the changed fields' values before and after. */
  changes?: AuditChanges;
}

/** The limits an account's figures are shown against (api.md section 8 by default). */
export interface AccountLimits {
  maxFiles: number;
  maxStoredBytes: number;
  maxFileBytes: number;
  createsPerMinute: number;
  createsPerDay: number;
  bytesPerDay: number;
}

export interface AdminRouterOptions {
  /**
   * Where keys are written: wrap it in `announceKeyChanges()` so that every process hears of a
   * change, with an `onError` so that a change made but not announced still answers (a rotation's
   * new key is shown only then).
   */
  keys: KeyStore;
  /** For the files and bytes an account keeps. */
  files: Pick<FileStore, 'usage'>;
  /** For today's creations: `MemoryCreationLimiter` and `RedisCreationLimiter` have `usage()`. Default: none (`null` figures). */
  creationLimiter?: { usage(account: string): Promise<CreationUsage> };
  /** Where the model calls' usage records are read, for `GET /usage`. Default: none (no such route). */
  usageStore?: Pick<UsageStore, 'summarize'>;
  /** The model endpoints' response cache, for `DELETE /cache`. Default: none (no such route). */
  responseCache?: Pick<ResponseCache, 'purge'>;
  /** The model catalog: a key's allowlist may name only these. */
  catalog: ReadonlyArray<{ id: string }>;
  /** The prefix of new keys (`<prefix>_sk_…`). Default `'kmg'`. */
  keyPrefix?: string;
  /** Default: api.md section 8. */
  limits?: Partial<AccountLimits>;
  /** Called after each change is made, for the log; `ctx.state.requestId` names the request. */
  onChange?: (change: AdminChange, ctx: Context) => void;
  /** The clock, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
}

/** What the route handlers share, resolved once from `AdminRouterOptions`. */
export interface AdminApi {
  keys: KeyStore;
  files: Pick<FileStore, 'usage'>;
  creationLimiter: { usage(account: string): Promise<CreationUsage> } | undefined;
  usageStore: Pick<UsageStore, 'summarize'> | undefined;
  keyPrefix: string;
  /** The ids of the catalog's models. */
  models: string[];
  limits: AccountLimits;
  schemas: ReturnType<typeof keyFieldSchemas>;
  /** Unix seconds, whole, as every store keeps its times. */
  now(): number;
  /** States a change on `ctx.state.audit` for `auditTrail()`, which records it once the answer is a success, and tells `onChange`. */
  report(ctx: Context, change: Omit<AdminChange, 'adminTokenId' | 'userId'>): void;
}

/**
 * The admin API under `/admin/v1`, to mount behind `adminAuth()`:
 * - `GET /catalog`: the scopes and models a key may be given, and the prefix of keys;
 * - `POST /keys` `{ account, name?, scopes?, models?, expires_at?, limits?, cache?, mcp_tools? }` → 201, the key with its
 *   secret `key`, the only time it is shown; `GET /keys?account=&q=` → `{ object: "list", data }`,
 *   `q` a prefix of the account, id or name (case-insensitive);
 * - `GET` and `PATCH /keys/{id}` (`scopes`, `models`, `expires_at`, `limits`, `cache`, `name`, `mcp_tools`);
 *   `POST /keys/{id}/revoke`; `POST /keys/{id}/rotate` `{ grace_seconds }` → 201, a new key with
 *   the old one's account, scopes, models, limits and expiry; the old key expires after the grace
 *   (or sooner, at its own expiry). Only an active key never rotated before is: 409
 *   `key_not_active` or `key_already_rotated` otherwise, so that a retried rotation makes no
 *   second key;
 * - `GET /accounts` → `{ object: "list", data }`: every account that has a key, with its active keys,
 *   files and bytes kept and (with `usageStore`, else `null`) this UTC month's requests and tokens;
 * - `GET /accounts/{account}`: files and bytes kept, creations and bytes today, and the limits;
 * - with `usageStore`, `GET /usage?account=&key=&since=&by=day|model|key&series=day|model|key`: requests
 *   and tokens of the model calls, grouped by UTC day, model or key, each group split by `series`;
 * - with `responseCache`, `DELETE /cache?account=` → 204: the response cache's answers of one
 *   account, or all of them, purged.
 * Every body and query is validated (400 naming the field); every change is reported to `onChange`
 * and stated on `ctx.state.audit` for `auditTrail()`.
 * @example app.use(adminRouter({ keys, files, creationLimiter, usageStore, catalog }).routes())
 */
export function adminRouter(options: AdminRouterOptions): Router {
  const { keys, files, creationLimiter, usageStore, responseCache, onChange } = options;
  if (typeof keys?.update !== 'function') throw new TypeError('koa-model-gateway: adminRouter() needs a KeyStore as `keys`');
  if (typeof files?.usage !== 'function') throw new TypeError('koa-model-gateway: adminRouter() needs a FileStore as `files`');
  if (usageStore !== undefined && typeof usageStore.summarize !== 'function') {
    throw new TypeError('koa-model-gateway: adminRouter() `usageStore` must be a UsageStore');
  }
  if (responseCache !== undefined && typeof responseCache.purge !== 'function') {
    throw new TypeError('koa-model-gateway: adminRouter() `responseCache` must be a ResponseCache');
  }
  if (!Array.isArray(options.catalog)) throw new TypeError('koa-model-gateway: adminRouter() needs the model catalog as `catalog`');
  const keyPrefix = options.keyPrefix ?? 'kmg';
  generateApiKey(keyPrefix); // throws now for a prefix that keys cannot have
  const limits: AccountLimits = {
    maxFiles: DEFAULT_FILE_LIMITS.maxFiles,
    maxStoredBytes: DEFAULT_FILE_LIMITS.maxStoredBytes,
    maxFileBytes: DEFAULT_FILE_LIMITS.maxFileBytes,
    ...DEFAULT_CREATION_LIMITS,
    ...options.limits,
  };
  const nowMs = options.nowMs ?? Date.now;
  const models = options.catalog.map((model) => model.id);
  // Whole seconds, as every store keeps its times: a fraction changes no answer (expiries are whole).
  const now = () => Math.floor(nowMs() / 1000);
  const api: AdminApi = {
    keys,
    files,
    creationLimiter,
    usageStore,
    keyPrefix,
    models,
    limits,
    schemas: keyFieldSchemas(new Set(models), now),
    now,
    report(ctx, change) {
      ctx.state.audit = change;
      onChange?.({ ...change, ...changedBy(verifiedAdmin(ctx)) }, ctx);
    },
  };

  const router = new Router({ prefix: ADMIN_API_PATH, sensitive: true, strict: true });
  router.get('/catalog', showCatalog(api));
  router.post('/keys', createKey(api));
  router.get('/keys', listKeys(api));
  router.get('/keys/:id', showKey(api));
  router.patch('/keys/:id', updateKey(api));
  router.post('/keys/:id/revoke', revokeKey(api));
  router.post('/keys/:id/rotate', rotateKey(api));
  router.get('/accounts', listAccounts(api));
  router.get('/accounts/:account', showAccount(api));
  if (usageStore) router.get('/usage', showUsage(usageStore));
  if (responseCache) router.delete('/cache', purgeCache(api, responseCache));
  return router;
}
