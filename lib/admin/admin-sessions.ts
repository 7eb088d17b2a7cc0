import { randomBytes } from 'node:crypto';
import Router from '@koa/router';
import { serialize } from 'cookie';
import type { Context } from 'koa';
import { z } from 'zod';
import { parseOptions, positiveInteger } from '../settings/schemas.js';
import { ADMIN_API_PATH, ADMIN_SESSION_COOKIE, hashSessionCookie, verifiedAdmin } from './admin-auth.js';
import { adminErrors } from './admin-errors.js';
import type { AdminChange } from './admin-router.js';
import type { AdminSession, AdminSessionStore } from './admin-session-store.js';

export interface AdminSessionsOptions {
  sessions: AdminSessionStore;
  /** How long a session lasts from login, in seconds. Default 28,800 (8 hours). */
  ttlSeconds?: number;
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

function sessionObject(session: AdminSession, tokenName: string | null) {
  return {
    object: 'admin_session',
    admin_token_id: session.tokenId,
    admin_token_name: tokenName,
    csrf_token: session.csrfToken,
    expires_at: session.expiresAt,
  };
}

/**
 * The dashboard's sessions, under `/admin/v1` behind `adminAuth({ tokens, sessions })`:
 * - `POST /sessions` with `Authorization: Bearer <admin token>` (the token itself, not a session)
 *   → 201 `{ object: 'admin_session', admin_token_id, admin_token_name, csrf_token, expires_at }`
 *   and a session cookie: `HttpOnly`, `SameSite=Strict`, `Path=/admin/v1`, `Secure` over TLS, kept
 *   on the server as a hash;
 * - `GET /sessions/current` → the same object, so that a reloaded page finds its CSRF token;
 * - `DELETE /sessions/current` → 204, the session ended and the cookie cleared (log out).
 * The token itself never reaches the browser's storage: the page sends it once, to log in.
 * @example app.use(adminSessions({ sessions: new KnexAdminSessionStore(knex) }).routes())
 */
export function adminSessions(options: AdminSessionsOptions): Router {
  const { sessions, onChange } = options;
  if (typeof sessions?.create !== 'function') throw new TypeError('koa-model-gateway: adminSessions() needs an AdminSessionStore as `sessions`');
  const { ttlSeconds } = parseOptions(sessionLimits, { ttlSeconds: options.ttlSeconds }, 'adminSessions()');
  const secure = options.secure ?? overTls;
  const nowMs = options.nowMs ?? Date.now;

  const cookie = (ctx: Context, value: string, maxAge: number) =>
    ctx.append(
      'Set-Cookie',
      serialize(ADMIN_SESSION_COOKIE, value, { httpOnly: true, sameSite: 'strict', path: ADMIN_API_PATH, maxAge, secure: secure(ctx) }),
    );
  const current = (ctx: Context) => {
    const { session } = verifiedAdmin(ctx);
    if (!session) throw adminErrors.sessionNotFound();
    return session;
  };

  const router = new Router({ prefix: ADMIN_API_PATH, sensitive: true, strict: true });

  router.post('/sessions', async (ctx) => {
    const admin = verifiedAdmin(ctx);
    if (admin.session) throw adminErrors.tokenRequired();
    const at = Math.floor(nowMs() / 1000);
    await sessions.removeExpired(at);
    const value = secret();
    const session: AdminSession = {
      hash: hashSessionCookie(value),
      tokenId: admin.tokenId,
      csrfToken: secret(),
      createdAt: at,
      expiresAt: at + ttlSeconds,
    };
    await sessions.create(session);
    cookie(ctx, value, ttlSeconds);
    ctx.state.audit = { action: 'session.opened' };
    onChange?.({ action: 'session.opened', adminTokenId: admin.tokenId }, ctx);
    ctx.status = 201;
    ctx.body = sessionObject(session, admin.tokenName);
  });

  router.get('/sessions/current', (ctx) => {
    ctx.body = sessionObject(current(ctx), verifiedAdmin(ctx).tokenName);
  });

  router.delete('/sessions/current', async (ctx) => {
    const session = current(ctx);
    await sessions.delete(session.hash);
    cookie(ctx, '', 0);
    ctx.state.audit = { action: 'session.closed' };
    onChange?.({ action: 'session.closed', adminTokenId: session.tokenId }, ctx);
    ctx.status = 204;
  });

  return router;
}
