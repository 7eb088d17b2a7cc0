import { hash, randomBytes } from 'node:crypto';
import { canonicalName } from '../printable-text.js';
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

/** The longest admin token name, in characters. */
export const MAX_ADMIN_TOKEN_NAME_LENGTH = 255;

/**
 * What a valid admin token name is, for error messages.
 * @example throw new UsageError(`--name ${ADMIN_TOKEN_NAME_RULE}`)
 */
export const ADMIN_TOKEN_NAME_RULE = `must be 1 to ${MAX_ADMIN_TOKEN_NAME_LENGTH} printable characters`;

/**
 * The admin token name `input` stands for, trimmed and in Unicode NFC; `undefined` when it is
 * empty, longer than 255 characters or not printable text: the name is shown in the dashboard, the
 * audit log and the CLI's lists, and logged, as it reads (the rule of key names).
 * @example const name = canonicalAdminTokenName(flag) ?? fail('invalid name')
 */
export function canonicalAdminTokenName(input: string): string | undefined {
  return canonicalName(input, MAX_ADMIN_TOKEN_NAME_LENGTH);
}

/**
 * Creates an admin token in `store` and returns the plaintext once, with the stored record. A
 * `name` must be as `canonicalAdminTokenName` makes it (else a `TypeError`).
 * @example const { token } = await createAdminToken(store, { prefix: 'kmg', name: 'ops laptop' })
 */
export async function createAdminToken(
  store: AdminTokenStore,
  options: { prefix: string; name?: string | null },
): Promise<{ token: string; record: AdminTokenRecord }> {
  if (!/^[A-Za-z0-9]+$/.test(options.prefix)) throw new TypeError('koa-model-gateway: the token prefix must be letters and digits');
  if (options.name != null && canonicalAdminTokenName(options.name) !== options.name) {
    throw new TypeError(`koa-model-gateway: an admin token name ${ADMIN_TOKEN_NAME_RULE}, trimmed and in Unicode NFC`);
  }
  const token = `${options.prefix}_admin_${randomBytes(SECRET_BYTES).toString('base64url')}`;
  const record = await store.create({ hash: hashAdminToken(token), name: options.name ?? null });
  return { token, record };
}
