import { hash, randomBytes } from 'node:crypto';
import type { AdminTokenRecord, AdminTokenStore } from './admin-token-store.js';

/** 256 bits, as API keys have. */
const SECRET_BYTES = 32;

/** `<prefix>_admin_<43 base64url characters>`; an API key is `<prefix>_sk_…` and never matches. */
const ADMIN_TOKEN = /^[A-Za-z0-9]+_admin_[A-Za-z0-9_-]{43}$/;

/**
 * True when `value` has the form of an admin token: checked before any lookup, so that an API
 * key sent to an admin route is refused without reading the database.
 * @example if (!isAdminTokenFormat(bearer)) throw adminErrors.invalidAdminToken()
 */
export function isAdminTokenFormat(value: string): boolean {
  return ADMIN_TOKEN.test(value);
}

/**
 * SHA-256 of the whole token, hex: the only form in which it is stored.
 * @example const record = await tokens.findByHash(hashAdminToken(presented))
 */
export function hashAdminToken(token: string): string {
  return hash('sha256', token, 'hex');
}

/**
 * Creates an admin token in `store` and returns the plaintext once, with the stored record.
 * @example const { token } = await createAdminToken(store, { prefix: 'kmg', name: 'ops laptop' })
 */
export async function createAdminToken(
  store: AdminTokenStore,
  options: { prefix: string; name?: string | null },
): Promise<{ token: string; record: AdminTokenRecord }> {
  if (!/^[A-Za-z0-9]+$/.test(options.prefix)) throw new TypeError('koa-model-gateway: the token prefix must be letters and digits');
  const token = `${options.prefix}_admin_${randomBytes(SECRET_BYTES).toString('base64url')}`;
  const record = await store.create({ hash: hashAdminToken(token), name: options.name ?? null });
  return { token, record };
}
