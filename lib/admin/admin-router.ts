import Router from '@koa/router';
import type { Context } from 'koa';
import type { KeyStore } from '../auth/key-store.js';
import { generateApiKey, keyStatus } from '../auth/keys.js';
import { SCOPES } from '../auth/scopes.js';
import type { FileStore } from '../files/file-store.js';
import { DEFAULT_FILE_LIMITS } from '../files/file-limits.js';
import { readJsonBody } from '../http/json-body.js';
import { DEFAULT_CREATION_LIMITS, type CreationUsage } from '../quota/creation-limits.js';
import { usageReport } from '../usage/usage-report.js';
import type { UsageStore } from '../usage/usage-store.js';
import { ADMIN_API_PATH, verifiedAdmin } from './admin-auth.js';
import { adminErrors } from './admin-errors.js';
import { accountName, keyFieldSchemas, parseFields } from './key-fields.js';
import { keyMatcher, keySearch } from './key-search.js';
import { keyObject } from './key-object.js';
import { usageObject, usageQuerySchema } from './usage-query.js';

/** What the admin API changed, and with which admin token: for the log of every change. */
export interface AdminChange {
  action: 'key.created' | 'key.updated' | 'key.revoked' | 'key.rotated' | 'session.opened' | 'session.closed';
  adminTokenId: string;
  keyId?: string;
  account?: string;
  /** `key.created`, `key.updated`: the fields the request set. */
  fields?: string[];
  /** `key.rotated`: the new key. */
  replacementId?: string;
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
  limiter?: { usage(account: string): Promise<CreationUsage> };
  /** Where the model calls' usage records are read, for `GET /usage`. Default: none (no such route). */
  usage?: Pick<UsageStore, 'summarize'>;
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

const ROTATION_REFUSALS = {
  not_found: adminErrors.keyNotFound,
  not_active: adminErrors.keyNotActive,
  replaced: adminErrors.keyAlreadyRotated,
} as const;

/** `GET /accounts` reads this many accounts' files at once. */
const ACCOUNT_READS_AT_ONCE = 8;

/** Request bodies are a few fields; an allowlist of every model of a large catalog fits. */
const BODY_LIMIT = 65_536;

/**
 * The admin API under `/admin/v1`, to mount behind `adminAuth()`:
 * - `GET /catalog`: the scopes and models a key may be given, and the prefix of keys;
 * - `POST /keys` `{ account, name?, scopes?, models?, expires_at?, limits? }` → 201, the key with its
 *   secret `key`, the only time it is shown; `GET /keys?account=&q=` → `{ object: "list", data }`,
 *   `q` a prefix of the account, id or name (case-insensitive);
 * - `GET` and `PATCH /keys/{id}` (`scopes`, `models`, `expires_at`, `limits`, `name`);
 *   `POST /keys/{id}/revoke`; `POST /keys/{id}/rotate` `{ grace_seconds }` → 201, a new key with
 *   the old one's account, scopes, models, limits and expiry; the old key expires after the grace
 *   (or sooner, at its own expiry). Only an active key never rotated before is: 409
 *   `key_not_active` or `key_already_rotated` otherwise, so that a retried rotation makes no
 *   second key;
 * - `GET /accounts` → `{ object: "list", data }`: every account that has a key, with its active keys,
 *   files and bytes kept and (with `usage`, else `null`) this UTC month's requests and tokens;
 * - `GET /accounts/{account}`: files and bytes kept, creations and bytes today, and the limits;
 * - with `usage`, `GET /usage?account=&key=&since=&by=day|model|key&series=day|model|key`: requests
 *   and tokens of the model calls, grouped by UTC day, model or key, each group split by `series`.
 * Every body and query is validated (400 naming the field); every change is reported to `onChange`
 * and stated on `ctx.state.audit` for `auditTrail()`.
 * @example app.use(adminRouter({ keys, files, limiter, usage, catalog }).routes())
 */
export function adminRouter(options: AdminRouterOptions): Router {
  const { keys, files, limiter, usage, onChange } = options;
  if (typeof keys?.update !== 'function') throw new TypeError('koa-model-gateway: adminRouter() needs a KeyStore as `keys`');
  if (typeof files?.usage !== 'function') throw new TypeError('koa-model-gateway: adminRouter() needs a FileStore as `files`');
  if (usage !== undefined && typeof usage.summarize !== 'function') {
    throw new TypeError('koa-model-gateway: adminRouter() `usage` must be a UsageStore');
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
  // Whole seconds, as every store keeps its times: a fraction changes no answer (expiries are whole).
  const now = () => Math.floor(nowMs() / 1000);
  const models = options.catalog.map((model) => model.id);
  const schemas = keyFieldSchemas(new Set(models), now);

  // For `auditTrail()`, which records it once the answer is a success, and for the log.
  const report = (ctx: Context, change: Omit<AdminChange, 'adminTokenId'>) => {
    ctx.state.audit = change;
    onChange?.({ ...change, adminTokenId: verifiedAdmin(ctx).tokenId }, ctx);
  };
  const body = (ctx: Context) => readJsonBody(ctx.req, BODY_LIMIT);
  async function existing(id: string) {
    const record = await keys.get(id);
    if (!record) throw adminErrors.keyNotFound();
    return record;
  }

  const router = new Router({ prefix: ADMIN_API_PATH, sensitive: true, strict: true });

  router.get('/catalog', (ctx) => {
    ctx.body = { object: 'catalog', scopes: SCOPES, models, key_prefix: keyPrefix };
  });

  router.post('/keys', async (ctx) => {
    const fields = parseFields(schemas.create, await body(ctx));
    const { key, hash, hint } = generateApiKey(keyPrefix);
    const record = await keys.create({
      account: fields.account,
      hash,
      hint,
      ...(fields.name == null ? {} : { name: fields.name }),
      scopes: fields.scopes ?? [...SCOPES],
      models: fields.models ?? null,
      expiresAt: fields.expires_at ?? null,
      ...(fields.limits ? { limits: fields.limits } : {}),
    });
    report(ctx, { action: 'key.created', keyId: record.id, account: record.account, fields: Object.keys(fields) });
    ctx.status = 201;
    ctx.body = { ...keyObject(record, now()), key };
  });

  router.get('/keys', async (ctx) => {
    const { account, q } = ctx.query;
    const filter = account === undefined ? {} : { account: parseFields(accountName, account, 'account') };
    const matches = q === undefined ? () => true : keyMatcher(parseFields(keySearch, q, 'q'));
    const at = now();
    ctx.body = { object: 'list', data: (await keys.list(filter)).filter(matches).map((record) => keyObject(record, at)) };
  });

  router.get('/keys/:id', async (ctx) => {
    ctx.body = keyObject(await existing(ctx.params.id as string), now());
  });

  router.patch('/keys/:id', async (ctx) => {
    const fields = parseFields(schemas.update, await body(ctx));
    const id = ctx.params.id as string;
    const record = await keys.update(id, {
      ...(fields.scopes === undefined ? {} : { scopes: fields.scopes }),
      ...(fields.models === undefined ? {} : { models: fields.models }),
      ...(fields.expires_at === undefined ? {} : { expiresAt: fields.expires_at }),
      ...(fields.limits === undefined ? {} : { limits: fields.limits }),
      ...(fields.name === undefined ? {} : { name: fields.name }),
    });
    if (!record) throw adminErrors.keyNotFound();
    report(ctx, { action: 'key.updated', keyId: record.id, account: record.account, fields: Object.keys(fields) });
    ctx.body = keyObject(record, now());
  });

  router.post('/keys/:id/revoke', async (ctx) => {
    const id = ctx.params.id as string;
    if (!(await keys.revoke(id))) throw adminErrors.keyNotFound();
    const record = await existing(id);
    report(ctx, { action: 'key.revoked', keyId: record.id, account: record.account });
    ctx.body = keyObject(record, now());
  });

  router.post('/keys/:id/rotate', async (ctx) => {
    const { grace_seconds: grace } = parseFields(schemas.rotate, await body(ctx));
    const { key, hash, hint } = generateApiKey(keyPrefix);
    const at = now();
    // One step in the store: a retried or concurrent rotation of the same key makes no second key.
    const result = await keys.rotate(ctx.params.id as string, { hash, hint, nowSeconds: at, graceEndsAt: at + grace });
    if (result.outcome !== 'rotated') throw ROTATION_REFUSALS[result.outcome]();
    const { old, replacement } = result;
    report(ctx, { action: 'key.rotated', keyId: old.id, account: old.account, replacementId: replacement.id });
    ctx.status = 201;
    ctx.body = { ...keyObject(replacement, at), key, replaces: { id: old.id, expires_at: old.expiresAt } };
  });

  router.get('/accounts', async (ctx) => {
    const at = now();
    const monthStart = new Date(at * 1000);
    const since = Date.UTC(monthStart.getUTCFullYear(), monthStart.getUTCMonth(), 1);
    // One summary by key for every account: its rows are folded into each key's account below.
    const [records, byKey] = await Promise.all([keys.list(), usage?.summarize({ since }, 'key')]);
    const accounts = new Map<string, { keys: number; requests: number; input: number; output: number }>();
    const accountOfKey = new Map<string, string>();
    for (const record of records) {
      accountOfKey.set(record.id, record.account);
      const entry = accounts.get(record.account) ?? { keys: 0, requests: 0, input: 0, output: 0 };
      if (keyStatus(record, at) === 'active') entry.keys += 1;
      accounts.set(record.account, entry);
    }
    for (const row of byKey ?? []) {
      const entry = accounts.get(accountOfKey.get(row.group ?? '') ?? '');
      if (!entry) continue;
      entry.requests += row.requests;
      entry.input += row.inputTokens;
      entry.output += row.outputTokens;
    }
    const sorted = [...accounts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    // A few accounts' files at a time: a thousand accounts make no thousand concurrent queries.
    const kept: Array<{ files: number; bytes: number }> = [];
    for (let start = 0; start < sorted.length; start += ACCOUNT_READS_AT_ONCE) {
      const batch = sorted.slice(start, start + ACCOUNT_READS_AT_ONCE);
      kept.push(...(await Promise.all(batch.map(([account]) => files.usage(account, at)))));
    }
    ctx.body = {
      object: 'list',
      data: sorted.map(([account, entry], index) => ({
        object: 'account_summary',
        account,
        keys: entry.keys,
        files: kept[index]?.files ?? 0,
        bytes: kept[index]?.bytes ?? 0,
        requests_this_month: usage ? entry.requests : null,
        input_tokens_this_month: usage ? entry.input : null,
        output_tokens_this_month: usage ? entry.output : null,
      })),
    };
  });

  router.get('/accounts/:account', async (ctx) => {
    const account = parseFields(accountName, ctx.params.account, 'account');
    const [kept, today] = await Promise.all([files.usage(account, now()), limiter?.usage(account)]);
    ctx.body = {
      object: 'account',
      account,
      files: kept.files,
      bytes: kept.bytes,
      creations_today: today?.createsToday ?? null,
      bytes_today: today?.bytesToday ?? null,
      limits: {
        max_files: limits.maxFiles,
        max_stored_bytes: limits.maxStoredBytes,
        max_file_bytes: limits.maxFileBytes,
        creates_per_minute: limits.createsPerMinute,
        creates_per_day: limits.createsPerDay,
        bytes_per_day: limits.bytesPerDay,
      },
    };
  });

  if (usage) {
    router.get('/usage', async (ctx) => {
      const query = parseFields(usageQuerySchema, { ...ctx.query });
      const report = await usageReport(usage, {
        by: query.by,
        ...(query.series === undefined ? {} : { series: query.series }),
        ...(query.account === undefined ? {} : { account: query.account }),
        ...(query.key === undefined ? {} : { keyId: query.key }),
        ...(query.since === undefined ? {} : { since: query.since * 1000 }),
      });
      ctx.body = usageObject(query, report);
    });
  }

  return router;
}
