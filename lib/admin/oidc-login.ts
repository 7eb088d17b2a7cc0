import Router from '@koa/router';
import { parse as parseCookies, serialize } from 'cookie';
import type { Context } from 'koa';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import * as oidc from 'openid-client';
import { z } from 'zod';
import { readBody } from '../http/json-body.js';
import { parseOptions, positiveInteger } from '../settings/schemas.js';
import { ADMIN_API_PATH } from './admin-auth.js';
import type { SessionMatch } from './admin-session-store.js';
import { sessionOpener, type AdminSessionsOptions } from './admin-sessions.js';
import { ADMIN_ROLES, effectiveRole, type AdminRole, type AdminUserStore } from './admin-user-store.js';

export interface OidcRoleMapping {
  /** The ID token's claim that carries the person's groups or roles (a string or an array of them). Default `groups`. */
  claim?: string;
  /**
   * Each value of the claim → the role it gives (`{ "gateway-admins": "admin" }`); a person with
   * several gets the most allowed. Default: none, the claim's values that are a role's own name
   * (`admin`, `operator`, `viewer`) give that role.
   */
  map?: Readonly<Record<string, AdminRole>>;
}

export interface OidcLoginOptions extends Pick<AdminSessionsOptions, 'sessions' | 'ttlSeconds' | 'secure' | 'onChange' | 'nowMs'> {
  /** The provider's issuer URL, where its discovery document is (`/.well-known/openid-configuration`). `https://`, or `http://` on a loopback address. */
  issuer: string;
  clientId: string;
  /** The client's secret (`client_secret_basic`); none for a public client, which PKCE alone protects. */
  clientSecret?: string;
  /**
   * The one address the provider sends the browser back to, as registered with it: the gateway's
   * public URL + `/admin/v1/oidc/callback`. Never taken from a request.
   */
  redirectUri: string;
  /** Where the browser goes once signed in. Default `/dashboard`. */
  afterSignIn?: string;
  /**
   * Where the provider sends the browser back after signing out there (`GET /oidc/logout`), as
   * registered with it (`post_logout_redirect_uri`). Default: `afterSignIn` on the redirect URL's origin.
   */
  postLogoutRedirectUri?: string;
  /** How the dashboard names the provider: "Sign in with <name>". Default `the identity provider`. */
  providerName?: string;
  /** The people who sign in: recorded at their first sign-in. */
  users: AdminUserStore;
  /** Where a person's role comes from, unless an admin assigned one. */
  roles?: OidcRoleMapping;
  /** Whether the dashboard offers the admin token's sign-in too (`adminSessions()`'s `tokenSignIn`): only reported. Default `true`. */
  tokenSignIn?: boolean;
  /** How long each call to the provider (discovery, keys, token) may take, in milliseconds. Default 10,000. */
  timeoutMs?: number;
}

/** The sign-in under way, in a cookie of its own: only this browser can finish it. */
const FLOW_COOKIE = 'kmg_oidc_flow';
const FLOW_PATH = `${ADMIN_API_PATH}/oidc`;
const FLOW_SECONDS = 600;
const SCOPE = 'openid email profile';

/** The `events` member that makes a JWT a back-channel logout token (OIDC Back-Channel Logout 1.0, 2.4). */
const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';
/** A logout token is a few hundred bytes; the form that carries it is refused past this. */
const LOGOUT_FORM_BYTES = 16 * 1024;
/** How far the provider's clock may be from ours, in seconds, as openid-client allows for ID tokens. */
const CLOCK_TOLERANCE_SECONDS = 30;

const flowSchema = z.object({ state: z.string(), nonce: z.string(), verifier: z.string() });
const loginOptions = z.object({ timeoutMs: positiveInteger.default(10_000) });

const LOOPBACK = new Set(['127.0.0.1', '[::1]', 'localhost']);

/**
 * The issuer as a URL: `https://`, or `http://` on a loopback address (a provider on the same
 * machine, tests). Throws a `TypeError` naming what is wrong, at start-up.
 */
export function issuerUrl(issuer: string): URL {
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw new TypeError('koa-model-gateway: the OIDC issuer must be a URL');
  }
  if (url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK.has(url.hostname))) return url;
  throw new TypeError('koa-model-gateway: the OIDC issuer must be an https:// URL (http:// only on a loopback address)');
}

/** The role the claim's values give, the most allowed of them; `null` when none does. */
export function claimRole(claims: Readonly<Record<string, unknown>>, mapping: OidcRoleMapping = {}): AdminRole | null {
  const raw = claims[mapping.claim ?? 'groups'];
  const values = (Array.isArray(raw) ? raw : [raw]).filter((value): value is string => typeof value === 'string');
  const roleOf = (value: string): AdminRole | undefined =>
    mapping.map ? (Object.hasOwn(mapping.map, value) ? mapping.map[value] : undefined) : ADMIN_ROLES.find((role) => role === value);
  const roles = values.map(roleOf).filter((role) => role !== undefined);
  return ADMIN_ROLES.find((role) => roles.includes(role)) ?? null;
}

/** Why a sign-in did not end in a session, as the page tells the person. */
type Refusal = { status: number; title: string; detail: string };

const refusals = {
  unreachable: {
    status: 502,
    title: 'The identity provider cannot be reached',
    detail: 'Signing in is not possible right now. Sessions already open keep working; try again in a moment.',
  },
  expired: { status: 400, title: 'This sign-in has expired', detail: 'It took too long, or began in another browser. Start again from the dashboard.' },
  refused: { status: 403, title: 'The identity provider did not sign you in', detail: 'It refused or cancelled the sign-in.' },
  unverified: {
    status: 400,
    title: 'The sign-in could not be verified',
    detail: 'The identity provider’s answer did not check out. Start again from the dashboard.',
  },
  logoutUnknown: {
    status: 400,
    title: 'This sign-out is not for this gateway',
    detail: 'It names no session of this gateway’s identity provider.',
  },
  disabled: { status: 403, title: 'Your account is disabled', detail: 'An admin of this gateway disabled it. Ask them to enable it again.' },
  noRole: {
    status: 403,
    title: 'You have no role on this gateway',
    detail:
      'You signed in, but neither your groups at the identity provider nor an admin of this gateway give you a role (admin, operator or viewer). Ask an admin to assign you one.',
  },
} satisfies Record<string, Refusal>;

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function refusalPage(ctx: Context, refusal: Refusal, afterSignIn: string) {
  ctx.status = refusal.status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'");
  ctx.body = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escapeHtml(refusal.title)}</title></head>
<body style="font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;line-height:1.5"><h1 style="font-size:1.4rem">${escapeHtml(refusal.title)}</h1><p>${escapeHtml(refusal.detail)}</p><p><a href="${escapeHtml(afterSignIn)}">Back to the dashboard</a></p></body></html>`;
}

/** A failure to reach the provider (network, timeout, a 5xx answer), told from an answer that did not check out. */
function unreachable(err: unknown): boolean {
  for (let cause = err; cause !== undefined && cause !== null; cause = (cause as { cause?: unknown }).cause) {
    if (cause instanceof Response || cause instanceof oidc.ResponseBodyError) return cause.status >= 500;
    if (!(cause instanceof Error)) return false;
    if (cause.name === 'TimeoutError' || cause.name === 'AbortError' || (cause instanceof TypeError && cause.message === 'fetch failed')) return true;
  }
  return false;
}

/**
 * Dashboard sign-in through an OpenID Connect provider (authorization code flow with PKCE, state
 * and nonce; the provider found by discovery, the ID token verified, all by `openid-client`), under
 * `/admin/v1`, mounted BEFORE `adminAuth()` (its routes need no credential):
 * - `GET /oidc` → `{ object: "oidc_provider", name, login_url, token_sign_in }`, for the login page;
 * - `GET /oidc/login` → 303 to the provider, the flow's secrets in a short-lived cookie of its own;
 * - `GET /oidc/callback` → the code exchanged, the person recorded in `users`, a dashboard session
 *   opened as `adminSessions()` opens one (`session.opened`, by the person), and 303 to
 *   `afterSignIn`; else a page that says why, with its status: the provider unreachable (502; open
 *   sessions are untouched), the flow expired or unverifiable (400), refused, a disabled user or
 *   one with no role (403); the session keeps the ID token's `sid`;
 * - `GET /oidc/logout` → 303 to the provider's `end_session_endpoint` (RP-initiated logout), back to
 *   `postLogoutRedirectUri`; to `afterSignIn` when it has none;
 * - `POST /oidc/backchannel-logout` → a logout token verified with the provider's keys (`jose`):
 *   200, the sessions of its `sid` and/or `sub` ended (`sessions.deleteMatching()`); else 400;
 * - `GET /oidc/frontchannel-logout?sid&iss` → the sessions of `sid` ended, a page the provider may frame.
 * The provider is discovered at the start of each sign-in (so that one down is told then); its
 * keys are fetched and cached by `openid-client`; every call to it is bounded by `timeoutMs`.
 * @example app.use(oidcLogin({ issuer, clientId, clientSecret, redirectUri: `${publicUrl}/admin/v1/oidc/callback`, users, sessions }).routes())
 */
export function oidcLogin(options: OidcLoginOptions): Router {
  const { clientId, clientSecret, redirectUri, users, roles } = options;
  const issuer = issuerUrl(options.issuer);
  if (typeof users?.signIn !== 'function') throw new TypeError('koa-model-gateway: oidcLogin() needs an AdminUserStore as `users`');
  if (typeof clientId !== 'string' || clientId === '') throw new TypeError('koa-model-gateway: oidcLogin() needs a `clientId`');
  const callback = new URL(redirectUri);
  const { timeoutMs } = parseOptions(loginOptions, { timeoutMs: options.timeoutMs }, 'oidcLogin()');
  const afterSignIn = options.afterSignIn ?? '/dashboard';
  const postLogoutRedirectUri = new URL(options.postLogoutRedirectUri ?? afterSignIn, callback.origin).href;
  const providerName = options.providerName ?? 'the identity provider';
  const tokenSignIn = options.tokenSignIn ?? true;
  const open = sessionOpener(options);
  const nowMs = options.nowMs ?? Date.now;
  const secure = options.secure ?? ((ctx: Context) => ctx.secure || callback.protocol === 'https:');

  // Discovered again at each sign-in's start, so that a provider down is told then, on a page
  // (sign-ins are rare); the callback uses the configuration, and the keys it cached, of the last.
  let discovered: Promise<oidc.Configuration> | undefined;
  const discover = () => {
    discovered = oidc
      .discovery(issuer, clientId, undefined, clientSecret === undefined ? oidc.None() : oidc.ClientSecretBasic(clientSecret), {
        timeout: Math.ceil(timeoutMs / 1000),
        ...(issuer.protocol === 'http:' && { execute: [oidc.allowInsecureRequests] }),
      })
      .catch((err: unknown) => {
        discovered = undefined;
        throw err;
      });
    return discovered;
  };
  const configuration = () => discovered ?? discover();

  // The provider's keys for logout tokens: fetched by jose when a token names a key not yet seen, each fetch bounded.
  let keys: { uri: string; set: ReturnType<typeof createRemoteJWKSet> } | undefined;
  const keySet = (config: oidc.Configuration) => {
    const uri = config.serverMetadata().jwks_uri;
    if (uri === undefined) throw new Error('the provider publishes no jwks_uri');
    if (keys?.uri !== uri) keys = { uri, set: createRemoteJWKSet(new URL(uri), { timeoutDuration: timeoutMs }) };
    return keys.set;
  };

  /** The sessions a verified logout token names: the person's (`sub`), those of the provider's session (`sid`), or both together. */
  const endSessions = async (config: oidc.Configuration, { sub, sid }: { sub?: string; sid?: string }, ctx: Context): Promise<void> => {
    let userId: string | undefined;
    if (sub !== undefined) {
      const iss = config.serverMetadata().issuer;
      userId = (await users.list()).find((user) => user.issuer === iss && user.subject === sub)?.id;
      // A person this gateway never signed in has no session here.
      if (userId === undefined) return;
    }
    const match: SessionMatch | undefined =
      userId !== undefined ? { userId, ...(sid !== undefined && { oidcSid: sid }) } : sid !== undefined ? { oidcSid: sid } : undefined;
    if (match === undefined) return;
    const ended = await options.sessions.deleteMatching(match);
    if (ended > 0) options.onChange?.({ action: 'session.closed', adminTokenId: null, ...(userId !== undefined && { userId }) }, ctx);
  };

  /** A logout token's claims once verified (OIDC Back-Channel Logout 1.0, 2.6): signed by the provider's keys as its ID tokens are, for this client, and a logout. */
  const verifyLogoutToken = async (config: oidc.Configuration, token: string): Promise<{ sub?: string; sid?: string }> => {
    const { payload } = await jwtVerify(token, keySet(config), {
      issuer: config.serverMetadata().issuer,
      audience: clientId,
      algorithms: [config.clientMetadata().id_token_signed_response_alg ?? 'RS256'],
      requiredClaims: ['iat'],
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
    });
    const { events } = payload;
    const event = typeof events === 'object' && events !== null ? (events as Record<string, unknown>)[BACKCHANNEL_LOGOUT_EVENT] : undefined;
    if (typeof event !== 'object' || event === null) throw new Error('not a logout token: no back-channel logout event');
    if (payload.nonce !== undefined) throw new Error('a logout token has no nonce');
    const sub = typeof payload.sub === 'string' && payload.sub !== '' ? payload.sub : undefined;
    const sid = typeof payload.sid === 'string' && payload.sid !== '' ? payload.sid : undefined;
    if (sub === undefined && sid === undefined) throw new Error('a logout token names a sub or a sid');
    return { ...(sub !== undefined && { sub }), ...(sid !== undefined && { sid }) };
  };

  const flowCookie = (ctx: Context, value: string, maxAge: number) =>
    // Lax, not Strict: the provider's redirect back is a navigation from another site.
    ctx.append('Set-Cookie', serialize(FLOW_COOKIE, value, { httpOnly: true, sameSite: 'lax', path: FLOW_PATH, maxAge, secure: secure(ctx) }));

  const router = new Router({ prefix: ADMIN_API_PATH, sensitive: true, strict: true });

  router.get('/oidc', (ctx) => {
    ctx.body = { object: 'oidc_provider', name: providerName, login_url: `${FLOW_PATH}/login`, logout_url: `${FLOW_PATH}/logout`, token_sign_in: tokenSignIn };
  });

  // RP-initiated logout: where the dashboard sends the browser once its session is ended, so that
  // the person is signed out at the provider too; back to the dashboard when it offers no such thing.
  router.get('/oidc/logout', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.status = 303;
    let config: oidc.Configuration | undefined;
    try {
      config = await configuration();
    } catch {
      config = undefined;
    }
    const endsSessions = config?.serverMetadata().end_session_endpoint !== undefined;
    ctx.redirect(config && endsSessions ? oidc.buildEndSessionUrl(config, { post_logout_redirect_uri: postLogoutRedirectUri }).href : afterSignIn);
  });

  // Back-channel logout: the provider posts a signed logout token when a person signs out there.
  router.post('/oidc/backchannel-logout', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const form = new URLSearchParams((await readBody(ctx.req, LOGOUT_FORM_BYTES)).toString('utf8'));
    const token = form.get('logout_token');
    let config: oidc.Configuration;
    let claims: { sub?: string; sid?: string };
    try {
      if (!ctx.is('application/x-www-form-urlencoded') || !token) throw new Error('a form with a logout_token is expected');
      config = await configuration();
      claims = await verifyLogoutToken(config, token);
    } catch {
      // Missing, unverifiable, or the provider's keys out of reach: the provider may send it again.
      ctx.status = 400;
      ctx.body = { error: 'invalid_request', error_description: 'The logout token is missing or did not verify.' };
      return;
    }
    await endSessions(config, claims, ctx);
    ctx.status = 200;
    ctx.body = '';
  });

  // Front-channel logout: the provider's page loads this in a frame, naming its session (`sid`, and
  // `iss`, which Entra ID leaves out: with one provider, a `sid` is of that one).
  router.get('/oidc/frontchannel-logout', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const { iss, sid } = ctx.query;
    let config: oidc.Configuration | undefined;
    try {
      config = await configuration();
    } catch {
      return refusalPage(ctx, refusals.unreachable, afterSignIn);
    }
    if (typeof sid !== 'string' || sid === '' || (iss !== undefined && iss !== config.serverMetadata().issuer)) {
      return refusalPage(ctx, refusals.logoutUnknown, afterSignIn);
    }
    await endSessions(config, { sid }, ctx);
    ctx.type = 'text/html; charset=utf-8';
    // Framed by the provider's page only.
    ctx.set('Content-Security-Policy', `default-src 'none'; frame-ancestors ${new URL(config.serverMetadata().issuer).origin}`);
    ctx.body = '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Signed out</title></head><body>Signed out.</body></html>';
  });

  router.get('/oidc/login', async (ctx) => {
    let config: oidc.Configuration;
    try {
      config = await discover();
    } catch {
      return refusalPage(ctx, refusals.unreachable, afterSignIn);
    }
    const flow = { state: oidc.randomState(), nonce: oidc.randomNonce(), verifier: oidc.randomPKCECodeVerifier() };
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: callback.href,
      scope: SCOPE,
      state: flow.state,
      nonce: flow.nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(flow.verifier),
      code_challenge_method: 'S256',
    });
    flowCookie(ctx, Buffer.from(JSON.stringify(flow)).toString('base64url'), FLOW_SECONDS);
    ctx.set('Cache-Control', 'no-store');
    ctx.status = 303;
    ctx.redirect(url.href);
  });

  router.get('/oidc/callback', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const flow = readFlow(parseCookies(ctx.get('Cookie'))[FLOW_COOKIE]);
    flowCookie(ctx, '', 0); // used once, whatever happens
    if (!flow) return refusalPage(ctx, refusals.expired, afterSignIn);
    let claims: oidc.IDToken;
    try {
      const config = await configuration();
      // The callback's own address, never the request's: only its query comes from the browser.
      const answered = new URL(callback.href);
      answered.search = ctx.querystring;
      const tokens = await oidc.authorizationCodeGrant(config, answered, {
        pkceCodeVerifier: flow.verifier,
        expectedState: flow.state,
        expectedNonce: flow.nonce,
        idTokenExpected: true,
      });
      claims = tokens.claims() as oidc.IDToken;
    } catch (err) {
      if (err instanceof oidc.AuthorizationResponseError) return refusalPage(ctx, refusals.refused, afterSignIn);
      return refusalPage(ctx, unreachable(err) ? refusals.unreachable : refusals.unverified, afterSignIn);
    }
    const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value.slice(0, 255) : null);
    const user = await users.signIn(
      { issuer: claims.iss, subject: claims.sub, email: text(claims.email), name: text(claims.name), claimRole: claimRole(claims, roles) },
      Math.floor(nowMs() / 1000),
    );
    if (user.disabled) return refusalPage(ctx, refusals.disabled, afterSignIn);
    const role = effectiveRole(user);
    if (!role) return refusalPage(ctx, refusals.noRole, afterSignIn);
    await open(
      ctx,
      { tokenId: null, tokenName: null, user, role },
      typeof claims.sid === 'string' && claims.sid !== '' && claims.sid.length <= 255 ? claims.sid : undefined,
    );
    ctx.status = 303;
    ctx.redirect(afterSignIn);
  });

  return router;
}

function readFlow(cookie: string | undefined): z.output<typeof flowSchema> | undefined {
  if (!cookie) return undefined;
  try {
    return flowSchema.parse(JSON.parse(Buffer.from(cookie, 'base64url').toString('utf8')));
  } catch {
    return undefined;
  }
}
