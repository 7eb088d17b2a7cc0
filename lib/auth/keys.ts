import { hash, randomBytes } from 'node:crypto';
import { checkModelLimits, type ModelLimits } from '../quota/model-limits.js';
import { canonicalKeyName, KEY_NAME_RULE } from './key-name.js';
import type { ApiKeyRecord, KeyCache, KeyRotationResult, KeyStore } from './key-store.js';
import { isScope, type Scope } from './scopes.js';

/** 32 bytes: 256 bits of entropy in every secret. */
const SECRET_BYTES = 32;

/**
 * SHA-256 of the whole key, hex: the only form in which a key is stored. One-shot `hash()`, not
 * a `Hash` object: every authenticated request pays for it.
 * @example const record = await store.findByHash(hashApiKey(presentedKey))
 */
export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex');
}

/** Whether a key is accepted: `revoked` and `expired` keys are refused with 401. */
export type KeyStatus = 'active' | 'revoked' | 'expired';

/** The key's status at `nowSeconds` (Unix seconds): what `apiKey()` decides by. */
export function keyStatus(record: ApiKeyRecord, nowSeconds: number): KeyStatus {
  if (record.revokedAt !== null) return 'revoked';
  if (record.expiresAt !== null && nowSeconds >= record.expiresAt) return 'expired';
  return 'active';
}

/** How many of the secret's last characters a key keeps as its `hint`: enough to tell keys apart, too few to matter. */
const HINT_LENGTH = 4;
const HINT = new RegExp(`^[A-Za-z0-9_-]{${HINT_LENGTH}}$`);

/**
 * Throws a `TypeError` unless `hint` is absent or four characters of a secret: what a key store
 * checks before it writes, so that no more of a secret is ever kept by mistake.
 */
export function assertKeyHint(hint: string | undefined): void {
  if (hint !== undefined && !HINT.test(hint)) throw new TypeError('koa-model-gateway: a key hint is the last four characters of its secret, no more');
}

/**
 * A new key `<prefix>_sk_<secret>`, its hash and its hint (the last four characters). Show `key`
 * once; store only `hash` and `hint`.
 * @example const { key, hash, hint } = generateApiKey('kmg')
 */
export function generateApiKey(prefix: string): { key: string; hash: string; hint: string } {
  if (!/^[A-Za-z0-9]+$/.test(prefix)) {
    throw new TypeError('koa-model-gateway: the key prefix must be letters and digits');
  }
  const key = `${prefix}_sk_${randomBytes(SECRET_BYTES).toString('base64url')}`;
  return { key, hash: hashApiKey(key), hint: key.slice(-HINT_LENGTH) };
}

/**
 * Creates a key in `store` and returns the plaintext once, with the stored record. `limits` are
 * the key's own limits on model calls (positive integers, else a `TypeError`); `name`, what the operator
 * calls it (`canonicalKeyName`, else a `TypeError`); `cache`, its own response caching (`{ ttlSeconds, perKey? }`); `scopes`, each one of `SCOPES` (else a `TypeError`).
 * @example const { key } = await createApiKey(store, { prefix: 'kmg', account: 'acme', scopes: [...SCOPES], limits: { requestsPerMinute: 60 } })
 */
export async function createApiKey(
  store: KeyStore,
  options: {
    prefix: string;
    account: string;
    scopes: Scope[];
    models?: string[] | null;
    expiresAt?: number | null;
    limits?: ModelLimits;
    cache?: KeyCache;
    name?: string | null;
    /** The key's MCP grant: globs over `{server}/{tool}`; default none. */
    mcpTools?: string[];
  },
): Promise<{ key: string; record: ApiKeyRecord }> {
  const limits = checkModelLimits(options.limits ?? {}, 'key limits');
  // A misspelt scope would be a key that silently lacks the permission meant.
  const unknown = options.scopes.find((scope) => !isScope(scope));
  if (unknown !== undefined) throw new TypeError(`koa-model-gateway: createApiKey(): unknown scope ${JSON.stringify(unknown)}`);
  if (options.name != null && canonicalKeyName(options.name) !== options.name) {
    throw new TypeError(`koa-model-gateway: a key name ${KEY_NAME_RULE}, trimmed and in Unicode NFC`);
  }
  const { key, hash, hint } = generateApiKey(options.prefix);
  const record = await store.create({
    account: options.account,
    hash,
    hint,
    ...(options.name != null && { name: options.name }),
    scopes: options.scopes,
    models: options.models ?? null,
    expiresAt: options.expiresAt ?? null,
    limits,
    ...(options.cache && { cache: checkKeyCache(options.cache) }),
    ...(options.mcpTools !== undefined && options.mcpTools.length > 0 && { mcpTools: options.mcpTools }),
  });
  return { key, record };
}

/** `cache` if it is one (a positive integer `ttlSeconds`), else a `TypeError`. */
function checkKeyCache(cache: KeyCache): KeyCache {
  if (!Number.isSafeInteger(cache.ttlSeconds) || cache.ttlSeconds <= 0)
    throw new TypeError('koa-model-gateway: a key cache ttlSeconds must be a positive integer');
  return { ttlSeconds: cache.ttlSeconds, ...(cache.perKey === true && { perKey: true }) };
}

/** What came of `rotateApiKey()`: the store's result, with the new key's plaintext when there is one. */
export type ApiKeyRotation =
  | { outcome: 'rotated'; key: string; old: ApiKeyRecord; replacement: ApiKeyRecord }
  | Exclude<KeyRotationResult, { outcome: 'rotated' }>;

/**
 * Replaces the key `id` in `store` with a new one of its account, scopes, models, limits, expiry
 * and name (`KeyStore.rotate`, once per key), and returns the new plaintext once. The old key
 * works `graceSeconds` more (a whole number, else a `TypeError`), or less when it expires sooner.
 * @example const rotation = await rotateApiKey(store, id, { prefix: 'kmg', nowSeconds: Math.floor(Date.now() / 1000), graceSeconds: 3600 })
 */
export async function rotateApiKey(
  store: KeyStore,
  id: string,
  options: { prefix: string; nowSeconds: number; graceSeconds: number },
): Promise<ApiKeyRotation> {
  const { nowSeconds, graceSeconds } = options;
  if (!Number.isSafeInteger(graceSeconds) || graceSeconds < 0) {
    throw new TypeError("koa-model-gateway: a rotation's grace is a whole number of seconds, 0 or more");
  }
  const { key, hash, hint } = generateApiKey(options.prefix);
  const result = await store.rotate(id, { hash, hint, nowSeconds, graceEndsAt: nowSeconds + graceSeconds });
  return result.outcome === 'rotated' ? { ...result, key } : result;
}
