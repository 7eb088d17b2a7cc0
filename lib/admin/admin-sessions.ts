import { randomBytes } from 'node:crypto';
import Router from '@koa/router';
import { serialize } from 'cookie';
import type { Context } from 'koa';
import { z } from 'zod';
import { parseOptions, positiveInteger } from '../settings/schemas.js';
import type { VerifiedAdmin } from '../state.js';
import { ADMIN_API_PATH, ADMIN_SESSION_COOKIE, changedBy, hashSessionCookie, verifiedAdmin } from './admin-auth.js';
import { adminErrors } from './admin-errors.js';
import type { AdminChange } from './admin-router.js';
import type { AdminSession, AdminSessionStore } from './admin-session-store.js';

export interface AdminSessionsOptions {
  sessions: AdminSessionStore;
  /** How long a session lasts from login, in seconds. Default 28,800 (8 hours). */
  ttlSeconds?: number;
  /**
   * Whether an admin token may open a session (`POST /sessions`): the break-glass sign-in beside
   * the OIDC provider's. `false` refuses it (403 `token_sign_in_disabled`); the token still works
   * as a Bearer on the API. Default `true`.
   */
  tokenSignIn?: boolean;
  /**
   * Whether the cookie is marked `Secure`. Default: when the request came over TLS, to this
   * process or, as `X-Forwarded-Proto: https` says, to a proxy in front of it. Trusting that
   * header here is safe: a client that sends it falsely only gets a cookie its browser will not
   * send back over plain HTTP.
   */
  secure?: (ctx: Context) => boolean;
  /** Called after a session is opened or closed, for the log. */
  onChange?: (change: AdminChange, ctx: Context) => void;
  /** The clock, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
}

const sessionLimits = z.object({ ttlSeconds: positiveInteger.default(28_800) });

const overTls = (ctx: Context) => ctx.secure || ctx.get('X-Forwarded-Proto').split(',')[0]?.trim() === 'https';

const secret = () => randomBytes(32).toString('base64url');

function sessionObject(admin: VerifiedAdmin, session: AdminSession) {
  const { user } = admin;
  return {
    object: 'admin_session',
    admin_token_id: session.tokenId,
    admin_token_name: admin.tokenName,
    user: user ? { id: user.id, email: user.email, name: user.name } : null,
    role: admin.role,
    csrf_token: session.csrfToken,
    expires_at: session.expiresAt,
  };
}

/**
 * What opens a session and sets its cookie: shared by the token's sign-in and the OIDC provider's,
 * which gives the provider's session (`sid`) the session is opened under.
 */
export type SessionOpener = (ctx: Context, admin: VerifiedAdmin, oidcSid?: string) => Promise<AdminSession>;

/**
 * Opens sessions in `sessions` for `ttlSeconds`, each with a new cookie (`HttpOnly`,
 * `SameSite=Strict`, `Path=/admin/v1`, `Secure` over TLS) and CSRF token, kept as a hash; the
 * cookie is set on `ctx`, the session put on `ctx.state.admin` and recorded as `session.opened`.
 * @example const open = sessionOpener({ sessions }); await open(ctx, { tokenId: null, tokenName: null, user, role })
 */
export function sessionOpener(options: Pick<AdminSessionsOptions, 'sessions' | 'ttlSeconds' | 'secure' | 'onChange' | 'nowMs'>): SessionOpener {
  const { sessions, onChange } = options;
  const { ttlSeconds } = parseOptions(sessionLimits, { ttlSeconds: options.ttlSeconds }, 'adminSessions()');
  const secure = options.secure ?? overTls;
  const nowMs = options.nowMs ?? Date.now;
  return async (ctx, admin, oidcSid) => {
    const at = Math.floor(nowMs() / 1000);
    await sessions.removeExpired(at);
    const value = secret();
    const session: AdminSession = {
      hash: hashSessionCookie(value),
      tokenId: admin.tokenId,
      userId: admin.user?.id ?? null,
      csrfToken: secret(),
      createdAt: at,
      expiresAt: at + ttlSeconds,
      lastSeenAt: at,
      ...(oidcSid !== undefined && { oidcSid }),
    };
    await sessions.create(session);
    setSessionCookie(ctx, value, ttlSeconds, secure);
    ctx.state.admin = { ...admin, session };
    ctx.state.audit = { action: 'session.opened' };
    onChange?.({ action: 'session.opened', ...changedBy(admin) }, ctx);
    return session;
  };
}

function setSessionCookie(ctx: Context, value: string, maxAge: number, secure: (ctx: Context) => boolean) {
  ctx.append('Set-Cookie', serialize(ADMIN_SESSION_COOKIE, value, { httpOnly: true, sameSite: 'strict', path: ADMIN_API_PATH, maxAge, secure: secure(ctx) }));
}

/**
 * The dashboard's sessions, under `/admin/v1` behind `adminAuth({ tokens, sessions })`:
 * - `POST /sessions` with `Authorization: Bearer <admin token>` (the token itself, not a session)
 *   → 201 `{ object: 'admin_session', admin_token_id, admin_token_name, user, role, csrf_token,
 *   expires_at }` and a session cookie (`sessionOpener()`); 403 `token_sign_in_disabled` when
 *   `tokenSignIn` is `false`;
 * - `GET /sessions/current` → the same object, so that a reloaded page finds its CSRF token (and a
 *   person's session, opened by `oidcLogin()`, who is signed in and with which role);
 * - `DELETE /sessions/current` → 204, the session ended and the cookie cleared (log out).
 * The token itself never reaches the browser's storage: the page sends it once, to log in.
 * @example app.use(adminSessions({ sessions: new KnexAdminSessionStore(knex) }).routes())
 */
export function adminSessions(options: AdminSessionsOptions): Router {
  const { sessions, onChange } = options;
  if (typeof sessions?.create !== 'function') throw new TypeError('koa-model-gateway: adminSessions() needs an AdminSessionStore as `sessions`');
  const open = sessionOpener(options);
  const secure = options.secure ?? overTls;
  const tokenSignIn = options.tokenSignIn ?? true;

  const current = (ctx: Context) => {
    const { session } = verifiedAdmin(ctx);
    if (!session) throw adminErrors.sessionNotFound();
    return session;
  };

  const router = new Router({ prefix: ADMIN_API_PATH, sensitive: true, strict: true });

  router.post('/sessions', async (ctx) => {
    const admin = verifiedAdmin(ctx);
    if (admin.session) throw adminErrors.tokenRequired();
    if (!tokenSignIn) throw adminErrors.tokenSignInDisabled();
    const session = await open(ctx, admin);
    ctx.status = 201;
    ctx.body = sessionObject(admin, session);
  });

  router.get('/sessions/current', (ctx) => {
    ctx.body = sessionObject(verifiedAdmin(ctx), current(ctx));
  });

  router.delete('/sessions/current', async (ctx) => {
    const session = current(ctx);
    await sessions.delete(session.hash);
    setSessionCookie(ctx, '', 0, secure);
    ctx.state.audit = { action: 'session.closed' };
    onChange?.({ action: 'session.closed', ...changedBy(verifiedAdmin(ctx)) }, ctx);
    ctx.status = 204;
  });

  return router;
}
