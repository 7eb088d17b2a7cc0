import { hash, timingSafeEqual } from 'node:crypto';
import { parse as parseCookies } from 'cookie';
import type { Context, Middleware } from 'koa';
import { adminErrors } from './admin-errors.js';
import type { AdminSessionStore } from './admin-session-store.js';
import type { AdminTokenRecord, AdminTokenStore } from './admin-token-store.js';
import { hashAdminToken, isAdminTokenFormat } from './admin-tokens.js';
import type { VerifiedAdmin } from '../state.js';

/** The dashboard's session cookie: sent only to the admin API's paths. */
export const ADMIN_SESSION_COOKIE = 'kmg_admin_session';
export const ADMIN_API_PATH = '/admin/v1';


export interface AdminAuthOptions {
  tokens: AdminTokenStore;
  /** Dashboard sessions; without them only `Authorization: Bearer <admin token>` is accepted. */
  sessions?: AdminSessionStore;
  /** The clock for session expiry, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
}

// Scheme case-insensitive, exactly one space, one token with no spaces in it (as for API keys).
const BEARER = /^bearer ([^\s]+)$/i;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

const live = (record: AdminTokenRecord | undefined) => (record?.revokedAt === null ? record : undefined);

/** SHA-256 (hex) of a session cookie's value: the form in which sessions are looked up. */
export function hashSessionCookie(value: string): string {
  return hash('sha256', value, 'hex');
}

function sameSecret(presented: string, expected: string): boolean {
  const a = Buffer.from(presented);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Admits a request to the admin API with `Authorization: Bearer <admin token>`, or, when there is
 * no Authorization header and `sessions` is given, with the dashboard's session cookie; a session
 * request that changes something (any method but GET, HEAD, OPTIONS) must also carry the session's
 * `X-CSRF-Token` (403 otherwise). Puts `{ tokenId, session? }` on `ctx.state.admin`.
 *
 * An API key is never an admin token: it has another form (`<prefix>_sk_…`), refused before any
 * lookup, and lives in another store. No credential, an unknown or revoked token, a session that
 * expired or whose token was revoked: 401 `invalid_admin_token`.
 * @example app.use(adminAuth({ tokens: new KnexAdminTokenStore(knex), sessions: new KnexAdminSessionStore(knex) }))
 */
export function adminAuth(options: AdminAuthOptions): Middleware {
  const { tokens, sessions } = options;
  if (typeof tokens?.findByHash !== 'function') throw new TypeError('koa-model-gateway: adminAuth() needs an AdminTokenStore as `tokens`');
  if (sessions !== undefined && typeof sessions.get !== 'function') {
    throw new TypeError('koa-model-gateway: adminAuth() `sessions` must be an AdminSessionStore');
  }
  const nowMs = options.nowMs ?? Date.now;

  async function fromSession(ctx: Context, store: AdminSessionStore): Promise<VerifiedAdmin | undefined> {
    const cookie = parseCookies(ctx.get('Cookie'))[ADMIN_SESSION_COOKIE];
    if (!cookie) return undefined;
    const session = await store.get(hashSessionCookie(cookie), Math.floor(nowMs() / 1000));
    const token = session && live(await tokens.get(session.tokenId));
    return token && session && { tokenId: token.id, tokenName: token.name, session };
  }

  return async function adminAuth(ctx, next) {
    const authorization = ctx.get('Authorization');
    let admin: VerifiedAdmin | undefined;
    if (authorization !== '' || sessions === undefined) {
      const token = BEARER.exec(authorization)?.[1];
      const record = token !== undefined && isAdminTokenFormat(token) ? live(await tokens.findByHash(hashAdminToken(token))) : undefined;
      admin = record && { tokenId: record.id, tokenName: record.name };
    } else {
      admin = await fromSession(ctx, sessions);
      if (admin && !SAFE_METHODS.has(ctx.method) && !sameSecret(ctx.get('X-CSRF-Token'), admin.session?.csrfToken ?? '')) {
        throw adminErrors.invalidCsrfToken();
      }
    }
    if (!admin) throw adminErrors.invalidAdminToken();
    ctx.state.admin = admin;
    return next();
  };
}

/**
 * The verified admin, for handlers behind `adminAuth()`.
 * @example logger.info({ adminTokenId: verifiedAdmin(ctx).tokenId }, 'key revoked')
 */
export function verifiedAdmin(ctx: Context): VerifiedAdmin {
  const admin = ctx.state.admin;
  if (!admin) throw new Error('koa-model-gateway: adminAuth() must run before this middleware');
  return admin;
}
