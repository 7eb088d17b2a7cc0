import { hash, timingSafeEqual } from 'node:crypto';
import { parse as parseCookies } from 'cookie';
import type { Context, Middleware } from 'koa';
import { adminErrors } from './admin-errors.js';
import type { AdminSession, AdminSessionStore } from './admin-session-store.js';
import type { AdminTokenRecord, AdminTokenStore } from './admin-token-store.js';
import { hashAdminToken, isAdminTokenFormat } from './admin-tokens.js';
import { effectiveRole, type AdminUserStore } from './admin-user-store.js';
import type { VerifiedAdmin } from '../state.js';

/** The dashboard's session cookie: sent only to the admin API's paths. */
export const ADMIN_SESSION_COOKIE = 'kmg_admin_session';
export const ADMIN_API_PATH = '/admin/v1';

export interface AdminAuthOptions {
  tokens: AdminTokenStore;
  /** Dashboard sessions; without them only `Authorization: Bearer <admin token>` is accepted. */
  sessions?: AdminSessionStore;
  /**
   * The people who sign in through the OIDC provider (`oidcLogin()`): their sessions are admitted
   * while the user is enabled and has a role, with that role. Without it a user's session is refused.
   */
  users?: AdminUserStore;
  /**
   * A session unused for this many seconds ends (the idle timeout); its use is recorded at most
   * once a minute. Default 0: sessions end only at their expiry.
   */
  idleSeconds?: number;
  /** The clock for session expiry, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
}

/** How stale a session's recorded last use may get before a request records it again, in seconds. */
const TOUCH_EVERY_SECONDS = 60;

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
 * `X-CSRF-Token` (403 otherwise). Puts `{ tokenId, tokenName, role, user?, session? }` on
 * `ctx.state.admin`: an admin token and its sessions act as `admin`; a person's session (opened by
 * `oidcLogin()`) with the person's role, while `users` has them enabled and with a role.
 *
 * An API key is never an admin token: it has another form (`<prefix>_sk_…`), refused before any
 * lookup, and lives in another store. No credential, an unknown or revoked token, a session that
 * expired, went idle, or whose token was revoked or user disabled: 401 `invalid_admin_token`.
 * @example app.use(adminAuth({ tokens: new KnexAdminTokenStore(knex), sessions: new KnexAdminSessionStore(knex) }))
 */
export function adminAuth(options: AdminAuthOptions): Middleware {
  const { tokens, sessions } = options;
  if (typeof tokens?.findByHash !== 'function') throw new TypeError('koa-model-gateway: adminAuth() needs an AdminTokenStore as `tokens`');
  if (sessions !== undefined && typeof sessions.get !== 'function') {
    throw new TypeError('koa-model-gateway: adminAuth() `sessions` must be an AdminSessionStore');
  }
  const { users } = options;
  const idleSeconds = options.idleSeconds ?? 0;
  if (!Number.isSafeInteger(idleSeconds) || idleSeconds < 0)
    throw new TypeError('koa-model-gateway: adminAuth() `idleSeconds` must be a whole number of seconds, 0 or more');
  const nowMs = options.nowMs ?? Date.now;

  async function sessionHolder(session: AdminSession): Promise<VerifiedAdmin | undefined> {
    if (session.tokenId !== null) {
      const token = live(await tokens.get(session.tokenId));
      return token && { tokenId: token.id, tokenName: token.name, role: 'admin', session };
    }
    const user = session.userId === null ? undefined : await users?.get(session.userId);
    const role = user && !user.disabled ? effectiveRole(user) : null;
    return user && role ? { tokenId: null, tokenName: null, user, role, session } : undefined;
  }

  async function fromSession(ctx: Context, store: AdminSessionStore): Promise<VerifiedAdmin | undefined> {
    const cookie = parseCookies(ctx.get('Cookie'))[ADMIN_SESSION_COOKIE];
    if (!cookie) return undefined;
    const now = Math.floor(nowMs() / 1000);
    const session = await store.get(hashSessionCookie(cookie), now);
    if (!session) return undefined;
    if (idleSeconds > 0 && now >= session.lastSeenAt + idleSeconds) {
      await store.delete(session.hash);
      return undefined;
    }
    const admin = await sessionHolder(session);
    if (admin && now - session.lastSeenAt >= TOUCH_EVERY_SECONDS) await store.touch(session.hash, now);
    return admin;
  }

  return async function adminAuth(ctx, next) {
    const authorization = ctx.get('Authorization');
    let admin: VerifiedAdmin | undefined;
    if (authorization !== '' || sessions === undefined) {
      const token = BEARER.exec(authorization)?.[1];
      const record = token !== undefined && isAdminTokenFormat(token) ? live(await tokens.findByHash(hashAdminToken(token))) : undefined;
      admin = record && { tokenId: record.id, tokenName: record.name, role: 'admin' };
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

/**
 * Who made a change, for an `onChange` report: the admin token, and the person when one did.
 * @example onChange?.({ action: 'key.revoked', keyId, ...changedBy(verifiedAdmin(ctx)) }, ctx)
 */
export function changedBy(admin: VerifiedAdmin): { adminTokenId: string | null; userId?: string } {
  return { adminTokenId: admin.tokenId, ...(admin.user && { userId: admin.user.id }) };
}
