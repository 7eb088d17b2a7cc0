import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse as parseCookies } from 'cookie';
import { importJWK, SignJWT, type JWTPayload } from 'jose';
import Provider from 'oidc-provider';
import { referenceApp } from './reference-app.js';
import { freePort, keepIdle } from './http.js';

/** Someone the test provider knows: the claims of their ID token. */
export interface Person {
  email?: string;
  name?: string;
  /** The `groups` claim. */
  groups?: string[];
}

/**
 * The provider's artifacts (sessions, grants, codes) in a Map of this provider's own: what its
 * quick-start adapter does, without the warning it prints for each provider.
 */
function memoryAdapter(artifacts: Map<string, { payload: Record<string, unknown>; model: string }>) {
  return class MemoryAdapter {
    constructor(readonly model: string) {}
    async upsert(id: string, payload: Record<string, unknown>) {
      artifacts.set(`${this.model}:${id}`, { payload, model: this.model });
    }
    async find(id: string) {
      return artifacts.get(`${this.model}:${id}`)?.payload;
    }
    async findByUid(uid: string) {
      return [...artifacts.values()].find((artifact) => artifact.model === this.model && artifact.payload.uid === uid)?.payload;
    }
    async findByUserCode(userCode: string) {
      return [...artifacts.values()].find((artifact) => artifact.model === this.model && artifact.payload.userCode === userCode)?.payload;
    }
    async consume(id: string) {
      const artifact = artifacts.get(`${this.model}:${id}`);
      if (artifact) artifact.payload.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string) {
      artifacts.delete(`${this.model}:${id}`);
    }
    async revokeByGrantId(grantId: string) {
      for (const [key, artifact] of artifacts) if (artifact.payload.grantId === grantId) artifacts.delete(key);
    }
  };
}

/** The cookie that tells the test provider who signs in: each test's browser, or jar, its own. */
export const PERSON_COOKIE = 'test_person';

export const OIDC_CLIENT = { id: 'kmg-dashboard', secret: 'test-client-secret-not-a-real-one' };

/**
 * A certified OpenID Provider (`oidc-provider`) on a random loopback port, for the gateway's
 * sign-in: one confidential client (`OIDC_CLIENT`) whose redirect URL is given once the gateway
 * is listening (`register`), the people of `people` (subject → claims, released in the ID token),
 * and an interaction that signs in at once (no pages to fill in) as the person the browser's
 * `PERSON_COOKIE` names on the provider's site, else the first of `people`. The client is
 * registered for back-channel logout (its ID tokens carry `sid`) and RP-initiated logout back to
 * the gateway's dashboard; `sessionIds(subject)` are the provider's sessions of someone, and
 * `logoutToken(claims)` signs a logout token with the provider's key.
 * `stop()` takes it down (the provider "is down"), `start()` brings it back on the same port.
 */
export async function testProvider(people: Record<string, Person>) {
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const server = createServer((req, res) => {
    if (handler) return handler(req, res);
    res.statusCode = 503;
    res.end();
  });
  keepIdle(server).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const issuer = `http://127.0.0.1:${port}`;
  // RS256: what the ID tokens of Okta, Entra ID, Google and Keycloak are signed with, and openid-client's default.
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), alg: 'RS256', use: 'sig', kid: 'test' };
  const someone = Object.keys(people)[0] ?? '';
  const artifacts = new Map<string, { payload: Record<string, unknown>; model: string }>();

  return {
    issuer,
    /** Makes the provider, with the gateway's callback as its client's one redirect URL. */
    register(redirectUri: string) {
      const provider = new Provider(issuer, {
        clients: [
          {
            client_id: OIDC_CLIENT.id,
            client_secret: OIDC_CLIENT.secret,
            redirect_uris: [redirectUri],
            backchannel_logout_uri: new URL('/admin/v1/oidc/backchannel-logout', redirectUri).href,
            backchannel_logout_session_required: true,
            post_logout_redirect_uris: [new URL('/dashboard', redirectUri).href],
            grant_types: ['authorization_code'],
            response_types: ['code'],
          },
        ],
        jwks: { keys: [jwk] },
        cookies: { keys: ['test-provider-cookie-key'] },
        adapter: memoryAdapter(artifacts),
        ttl: { Interaction: 600, Grant: 600, Session: 600, AccessToken: 600, IdToken: 600, AuthorizationCode: 60 },
        claims: { openid: ['sub'], email: ['email'], profile: ['name', 'groups'] },
        // The claims of the granted scopes in the ID token itself, as Okta and Entra ID put groups there.
        conformIdTokenClaims: false,
        features: {
          devInteractions: { enabled: false },
          backchannelLogout: { enabled: true },
          // Its sign-out page, without the web font of the default one.
          rpInitiatedLogout: {
            logoutSource: (ctx, form) => {
              ctx.body = `<!doctype html><html lang="en"><head><title>Sign out</title></head><body>${form}<button autofocus type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button></body></html>`;
            },
          },
        },
        // Its back-channel logout calls the gateway on a loopback address, which its guard against
        // server-side request forgery refuses: without that guard (its `dispatcher`), here only.
        fetch: (url, init) => {
          const options: RequestInit & { dispatcher?: unknown } = { ...init };
          delete options.dispatcher;
          return globalThis.fetch(url, options);
        },
        findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub, ...people[sub] }) }),
      });
      const callback = provider.callback();
      handler = (req, res) => {
        if (!req.url?.startsWith('/interaction/')) return callback(req, res);
        void (async () => {
          const details = await provider.interactionDetails(req, res);
          const subject = parseCookies(req.headers.cookie ?? '')[PERSON_COOKIE] ?? someone;
          const grant = new provider.Grant({ accountId: subject, clientId: String(details.params.client_id) });
          grant.addOIDCScope(String(details.params.scope));
          const grantId = await grant.save();
          await provider.interactionFinished(req, res, { login: { accountId: subject }, consent: { grantId } }, { mergeWithLastSubmission: false });
        })().catch(() => {
          res.statusCode = 500;
          res.end();
        });
      };
    },
    /** The `sid` of each session `subject` has at the provider with the gateway's client. */
    sessionIds(subject: string): string[] {
      return [...artifacts.values()]
        .filter(({ model, payload }) => model === 'Session' && payload.accountId === subject)
        .map(({ payload }) => (payload.authorizations as Record<string, { sid?: string }> | undefined)?.[OIDC_CLIENT.id]?.sid)
        .filter((sid): sid is string => typeof sid === 'string');
    },
    /** A logout token as the provider signs one (its key, issuer and the client as audience), with `claims` over the usual ones. */
    async logoutToken(claims: JWTPayload, header: { kid?: string } = {}) {
      const key = await importJWK(jwk, 'RS256');
      return new SignJWT({
        iss: issuer,
        aud: OIDC_CLIENT.id,
        events: { 'http://schemas.openid.net/event/backchannel-logout': {} },
        jti: randomUUID(),
        ...claims,
      })
        .setProtectedHeader({ alg: 'RS256', typ: 'logout+jwt', kid: 'test', ...header })
        .setIssuedAt()
        .setExpirationTime('2m')
        .sign(key);
    },
    stop() {
      server.closeAllConnections();
      server.close();
    },
    async start() {
      server.listen(port, '127.0.0.1');
      await once(server, 'listening');
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type TestProvider = Awaited<ReturnType<typeof testProvider>>;

/**
 * `person`'s sign-in without a browser: `GET /admin/v1/oidc/login` on the gateway, every redirect
 * followed by hand with each site's cookies, until the gateway answers something else than a
 * redirect to the provider. Resolves with the gateway's last answer and the session cookie it set.
 */
export async function signInWithoutBrowser(gatewayUrl: string, person: string) {
  const jars = new Map<string, Map<string, string>>();
  const gatewayHost = new URL(gatewayUrl).host;
  let url = new URL('/admin/v1/oidc/login', gatewayUrl);
  for (let hop = 0; hop < 10; hop++) {
    const jar = jars.get(url.host) ?? new Map<string, string>(url.host === gatewayHost ? [] : [[PERSON_COOKIE, person]]);
    jars.set(url.host, jar);
    const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
    const res = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    for (const set of res.headers.getSetCookie()) {
      const [pair = ''] = set.split(';');
      const at = pair.indexOf('=');
      jar.set(pair.slice(0, at), pair.slice(at + 1));
    }
    const location = res.headers.get('location');
    const next = location === null ? null : new URL(location, url);
    // Back on the gateway, past its callback: signed in or refused, either way the end.
    if (next === null || (next.host === gatewayHost && !next.pathname.startsWith('/admin/v1/oidc/'))) {
      const session = jars.get(gatewayHost)?.get('kmg_admin_session');
      const provider = [...jars].find(([host]) => host !== gatewayHost)?.[1] ?? new Map<string, string>();
      // The provider's cookies of this browser: what signs it out there.
      const providerCookie = [...provider].map(([name, value]) => `${name}=${value}`).join('; ');
      return { res, location: next, session: session ? `kmg_admin_session=${session}` : undefined, providerCookie };
    }
    await res.body?.cancel();
    url = next;
  }
  throw new Error('the sign-in did not end within 10 redirects');
}

/**
 * The reference app (`referenceApp`, on `env`: the deployment's) signing people in through a test
 * provider of `people`, whose groups give roles: `gw-admins` admin, `gw-ops` operator, `gw-readers`
 * viewer. `teardown` is given what closes each. Resolves with both and the whole environment.
 */
export async function ssoReferenceApp(
  people: Record<string, Person>,
  env: Record<string, string>,
  teardown: (cleanup: () => Promise<void>) => void,
  options: { nowMs?: () => number } = {},
) {
  const provider = await testProvider(people);
  teardown(() => provider.close());
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const ssoEnv = {
    PUBLIC_URL: publicUrl,
    OIDC_ISSUER: provider.issuer,
    OIDC_CLIENT_ID: OIDC_CLIENT.id,
    OIDC_CLIENT_SECRET: OIDC_CLIENT.secret,
    OIDC_PROVIDER_NAME: 'Test ID',
    OIDC_ROLES: 'gw-admins=admin,gw-ops=operator,gw-readers=viewer',
    ...env,
  };
  const app = await referenceApp(undefined, ssoEnv, { port, ...options });
  teardown(() => app.close());
  provider.register(`${publicUrl}/admin/v1/oidc/callback`);
  return { app, provider, env: ssoEnv };
}
