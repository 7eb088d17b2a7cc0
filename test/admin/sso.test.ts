import { generateKeyPairSync } from 'node:crypto';
import test from 'ava';
import { SignJWT } from 'jose';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { ConfigError } from '../../reference-server/config-error.js';
import { loadConfig } from '../../reference-server/config.js';
import { checkedFetch } from '../helpers/openapi.js';
import { OIDC_CLIENT, signInWithoutBrowser, ssoReferenceApp } from '../helpers/oidc-provider.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { withPostgres } from '../helpers/services.js';
import { referenceApp, type ReferenceApp } from '../helpers/reference-app.js';

// Dashboard sign-in through a real OpenID Provider (oidc-provider, on a loopback port), on the
// reference server's own app: sessions of each role, the admin API's refusals by role on every
// route, people recorded, disabled and named in the audit log, the provider down, the admin
// token's sign-in switched off, the idle timeout, and sessions shared by two servers on PostgreSQL.

const PEOPLE = {
  ada: { email: 'ada@example.com', name: 'Ada Admin', groups: ['staff', 'gw-admins'] },
  otto: { email: 'otto@example.com', name: 'Otto Operator', groups: ['gw-ops'] },
  vera: { email: 'vera@example.com', name: 'Vera Viewer', groups: ['gw-readers'] },
  nora: { email: 'nora@example.com', name: 'Nora Nobody', groups: ['staff'] },
  dora: { email: 'dora@example.com', name: 'Dora Disabled', groups: ['gw-ops'] },
  lena: { email: 'lena@example.com', name: 'Lena Leaving', groups: ['gw-ops'] },
  finn: { email: 'finn@example.com', name: 'Finn Finished', groups: ['gw-readers'] },
};
type Who = keyof typeof PEOPLE;

/** The reference app signing people in through a test provider, on a clock the test moves (Unix seconds). */
async function ssoGateway(teardown: (cleanup: () => Promise<void>) => void, env: Record<string, string> = {}) {
  const clock = { seconds: Math.floor(Date.now() / 1000) };
  const { app, provider, env: ssoEnv } = await ssoReferenceApp(PEOPLE, env, teardown, { nowMs: () => clock.seconds * 1000 });
  const problems: string[] = [];
  return { app, provider, clock, env: ssoEnv, fetch: checkedFetch(problems), problems };
}

type Gateway = Awaited<ReturnType<typeof ssoGateway>>;

// One provider and one app (SQLite) for the tests of this file but the last, each signing its own
// people in (the provider's sign-ins are told apart by the browser's cookie). The two that stop the
// provider or move the clock run serially, first; the rest at once. The app's settings: the admin
// token's sign-in off, sessions of 30 minutes that end after 10 unused.
const cleanups: Array<() => Promise<void>> = [];
let shared: Promise<Gateway> | undefined;
const sharedGateway = () =>
  (shared ??= ssoGateway((cleanup) => cleanups.push(cleanup), { DASHBOARD_TOKEN_SIGN_IN: 'false', SESSION_IDLE_SECONDS: '600', SESSION_SECONDS: '1800' }));
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** `who` signed in: calls to the admin API with their session cookie and CSRF token. */
async function signedIn(gateway: Gateway, who: Who, app: ReferenceApp = gateway.app) {
  const { res, location, session, providerCookie } = await signInWithoutBrowser(app.url, who);
  if (res.status !== 303 || !session) throw new Error(`${who} was not signed in: ${res.status} ${await res.text()}`);
  const current = await gateway.fetch(`${app.url}/admin/v1/sessions/current`, { headers: { cookie: session } });
  const { csrf_token: csrf, role, user } = (await current.json()) as { csrf_token: string; role: string; user: { id: string; email: string } };
  const call = (method: string, path: string, body?: unknown, onApp: ReferenceApp = app) =>
    gateway.fetch(`${onApp.url}/admin/v1${path}`, {
      method,
      headers: { cookie: session, 'x-csrf-token': csrf, ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  const unchecked = (method: string, path: string) => fetch(`${app.url}/admin/v1${path}`, { method, headers: { cookie: session, 'x-csrf-token': csrf } });
  return { location, session, providerCookie, role, user, call, unchecked };
}

/** A back-channel logout as the provider sends one: a form with the token, to `app`. */
const backchannelLogout = (gateway: Gateway, logoutToken: string, app: ReferenceApp = gateway.app) =>
  gateway.fetch(`${app.url}/admin/v1/oidc/backchannel-logout`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ logout_token: logoutToken }).toString(),
  });

const newKey = async (app: ReferenceApp, account = 'acme') =>
  (await createApiKey(app.deployment.keys, { prefix: app.config.gateway.keyPrefix, account, scopes: ['models:read'], models: null })).record.id;

test('a person signs in through the provider: a session of the role their groups give, and the dashboard next', async (t) => {
  const gateway = await sharedGateway();
  const { app } = gateway;
  t.deepEqual(await (await gateway.fetch(`${app.url}/admin/v1/oidc`)).json(), {
    object: 'oidc_provider',
    name: 'Test ID',
    login_url: '/admin/v1/oidc/login',
    logout_url: '/admin/v1/oidc/logout',
    token_sign_in: false,
  });
  const ada = await signedIn(gateway, 'ada');
  t.is(ada.location?.pathname, '/dashboard');
  t.is(ada.role, 'admin');
  t.like(ada.user, { email: 'ada@example.com' });
  for (const [who, role] of [
    ['otto', 'operator'],
    ['vera', 'viewer'],
  ] as const)
    t.is((await signedIn(gateway, who)).role, role);
  // Recorded once each, however often they sign in, with what the provider said.
  await signedIn(gateway, 'ada');
  const users = (await (await ada.call('GET', '/users')).json()) as { data: Array<Record<string, unknown>> };
  const listed = (email: string) => users.data.filter((user) => user.email === email).map((user) => [user.name, user.role, user.claim_role, user.issuer]);
  t.deepEqual(listed('ada@example.com'), [['Ada Admin', 'admin', 'admin', gateway.provider.issuer]]);
  t.deepEqual(listed('otto@example.com'), [['Otto Operator', 'operator', 'operator', gateway.provider.issuer]]);
  t.deepEqual(listed('vera@example.com'), [['Vera Viewer', 'viewer', 'viewer', gateway.provider.issuer]]);
  // The sign-in is in the audit log, by the person; no secret anywhere in the log lines.
  const audit = (await (await ada.call('GET', '/audit?action=session.opened&limit=100')).json()) as { data: Array<{ actor: { id: string } }> };
  t.deepEqual(audit.data.find((entry) => entry.actor.id === ada.user.id)?.actor, { type: 'user', id: ada.user.id, name: 'ada@example.com' });
  const logged = JSON.stringify(app.logs);
  t.false(logged.includes(OIDC_CLIENT.secret));
  t.false(logged.includes(ada.session.split('=')[1] ?? 'no session'));
  t.deepEqual(gateway.problems, [], 'every answer as docs/openapi.json describes it');
});

// Each route of the admin API, and what each role gets: 2xx where it may, 403 role_not_allowed where not.
const ROUTES: Array<{
  route: string;
  least: 'viewer' | 'operator' | 'admin';
  call: (gateway: Gateway, as: Awaited<ReturnType<typeof signedIn>>) => Promise<Response>;
}> = [
  { route: 'GET /catalog', least: 'viewer', call: (_, as) => as.call('GET', '/catalog') },
  { route: 'GET /models', least: 'viewer', call: (_, as) => as.call('GET', '/models') },
  { route: 'GET /keys', least: 'viewer', call: (_, as) => as.call('GET', '/keys') },
  { route: 'GET /keys/{id}', least: 'viewer', call: async (g, as) => as.call('GET', `/keys/${await newKey(g.app)}`) },
  { route: 'GET /accounts', least: 'viewer', call: (_, as) => as.call('GET', '/accounts') },
  { route: 'GET /accounts/{account}', least: 'viewer', call: (_, as) => as.call('GET', '/accounts/acme') },
  { route: 'GET /accounts/{account}/limits', least: 'viewer', call: (_, as) => as.call('GET', '/accounts/acme/limits') },
  { route: 'GET /keys/{id}/spend', least: 'viewer', call: async (g, as) => as.call('GET', `/keys/${await newKey(g.app)}/spend`) },
  { route: 'GET /usage', least: 'viewer', call: (_, as) => as.call('GET', '/usage') },
  { route: 'GET /audit', least: 'viewer', call: (_, as) => as.call('GET', '/audit') },
  { route: 'GET /requests', least: 'viewer', call: (_, as) => as.call('GET', '/requests') },
  { route: 'GET /requests/export', least: 'viewer', call: (_, as) => as.call('GET', '/requests/export?since=2030-01-01&format=csv') },
  { route: 'GET /sessions/current', least: 'viewer', call: (_, as) => as.call('GET', '/sessions/current') },
  { route: 'POST /keys', least: 'operator', call: (_, as) => as.call('POST', '/keys', { account: 'acme', name: 'made by a role' }) },
  { route: 'PATCH /keys/{id}', least: 'operator', call: async (g, as) => as.call('PATCH', `/keys/${await newKey(g.app)}`, { name: 'renamed' }) },
  { route: 'POST /keys/{id}/revoke', least: 'operator', call: async (g, as) => as.call('POST', `/keys/${await newKey(g.app)}/revoke`) },
  { route: 'POST /keys/{id}/rotate', least: 'operator', call: async (g, as) => as.call('POST', `/keys/${await newKey(g.app)}/rotate`, { grace_seconds: 60 }) },
  { route: 'PUT /accounts/{account}/limits', least: 'operator', call: (_, as) => as.call('PUT', '/accounts/acme/limits', { costPerDay: 5 }) },
  { route: 'GET /users', least: 'admin', call: (_, as) => as.call('GET', '/users') },
  { route: 'PATCH /users/{id}', least: 'admin', call: (_, as) => as.call('PATCH', `/users/${as.user.id}`, { disabled: false }) },
  // A route that does not exist is refused before it is looked for: a change is the admin's.
  { route: 'DELETE /settings (none yet)', least: 'admin', call: (_, as) => as.unchecked('DELETE', '/settings') },
];

test('the admin API refuses each role what it may not do, on every route', async (t) => {
  const gateway = await sharedGateway();
  const order = ['viewer', 'operator', 'admin'];
  for (const [who, role] of [
    ['vera', 'viewer'],
    ['otto', 'operator'],
    ['ada', 'admin'],
  ] as const) {
    const as = await signedIn(gateway, who);
    for (const { route, least, call } of ROUTES) {
      const res = await call(gateway, as);
      const allowed = order.indexOf(role) >= order.indexOf(least);
      if (allowed && route.includes('none yet')) t.is(res.status, 404, `${role} × ${route}`);
      else if (allowed) t.true(res.status >= 200 && res.status < 300, `${role} × ${route}: ${res.status}`);
      else t.like({ status: res.status, ...((await res.json()) as object) }, { status: 403, error: { code: 'role_not_allowed' } }, `${role} × ${route}`);
    }
  }
  t.deepEqual(gateway.problems, [], 'every answer as docs/openapi.json describes it');
});

test('no role: a page that says why; disabled: sessions end at the next request, and no new one', async (t) => {
  const gateway = await sharedGateway();
  const refused = await signInWithoutBrowser(gateway.app.url, 'nora');
  t.is(refused.res.status, 403);
  t.is(refused.session, undefined);
  t.regex(await refused.res.text(), /You have no role on this gateway/);

  const ada = await signedIn(gateway, 'ada');
  const dora = await signedIn(gateway, 'dora');
  t.is((await dora.call('GET', '/keys')).status, 200);
  const updated = await ada.call('PATCH', `/users/${dora.user.id}`, { disabled: true });
  t.like(await updated.json(), { object: 'user', disabled: true, role: 'operator' });
  t.is((await dora.call('GET', '/keys')).status, 401);
  const again = await signInWithoutBrowser(gateway.app.url, 'dora');
  t.is(again.res.status, 403);
  t.regex(await again.res.text(), /Your account is disabled/);
  // The change is in the audit log with its values, by the admin.
  const audit = (await (await ada.call('GET', '/audit?action=user.updated&limit=100')).json()) as { data: Array<{ user_id: string }> };
  t.like(
    audit.data.find((entry) => entry.user_id === dora.user.id),
    {
      action: 'user.updated',
      actor: { type: 'user', id: ada.user.id, name: 'ada@example.com' },
      user_id: dora.user.id,
      fields: ['disabled'],
      changes: { disabled: { from: false, to: true } },
    },
  );
  // A role an admin assigns wins over the groups'.
  t.like(await (await ada.call('PATCH', `/users/${dora.user.id}`, { disabled: false, role: 'viewer' })).json(), { role: 'viewer', claim_role: 'operator' });
  t.is((await signedIn(gateway, 'dora')).role, 'viewer');
  t.like(await (await ada.call('PATCH', `/users/${dora.user.id}`, { role: 'owner' })).json(), { error: { code: 'invalid_role' } });
  t.is((await ada.call('PATCH', '/users/usr_000000000000000000000000', { disabled: true })).status, 404);
  t.deepEqual(gateway.problems, [], 'every answer as docs/openapi.json describes it');
});

test.serial('the provider down: signing in answers a page that says so, signed-in sessions keep working', async (t) => {
  const gateway = await sharedGateway();
  const vera = await signedIn(gateway, 'vera');
  gateway.provider.stop();
  const down = await fetch(`${gateway.app.url}/admin/v1/oidc/login`, { redirect: 'manual' });
  t.is(down.status, 502);
  t.regex(await down.text(), /The identity provider cannot be reached/);
  t.is((await vera.call('GET', '/keys')).status, 200);
  await gateway.provider.start();
  t.is((await signedIn(gateway, 'vera')).role, 'viewer');
  t.deepEqual(gateway.problems, [], 'every answer as docs/openapi.json describes it');
});

test('a callback that did not start here, or whose state does not match, opens no session', async (t) => {
  const gateway = await sharedGateway();
  const forged = await fetch(`${gateway.app.url}/admin/v1/oidc/callback?code=abc&state=xyz`, { redirect: 'manual' });
  t.is(forged.status, 400);
  t.is(forged.headers.getSetCookie().filter((cookie) => cookie.startsWith('kmg_admin_session=')).length, 0);
  // A real flow's cookie with another state: refused too.
  const login = await fetch(`${gateway.app.url}/admin/v1/oidc/login`, { redirect: 'manual' });
  const flow = login.headers.getSetCookie()[0]?.split(';')[0] ?? '';
  const redirect = new URL(login.headers.get('location') ?? '');
  t.is(redirect.searchParams.get('redirect_uri'), `${gateway.env.PUBLIC_URL}/admin/v1/oidc/callback`);
  t.is(redirect.searchParams.get('code_challenge_method'), 'S256');
  const mismatched = await fetch(`${gateway.app.url}/admin/v1/oidc/callback?code=abc&state=other`, { redirect: 'manual', headers: { cookie: flow } });
  t.is(mismatched.status, 400);
  t.regex(await mismatched.text(), /could not be verified/);
  t.deepEqual(gateway.problems, [], 'every answer as docs/openapi.json describes it');
});

test('the admin token sign-in switched off: refused for the dashboard, the token still works on the API', async (t) => {
  const gateway = await sharedGateway();
  const { app } = gateway;
  const { token } = await createAdminToken(app.deployment.adminTokens, { prefix: app.config.gateway.keyPrefix });
  const opened = await gateway.fetch(`${app.url}/admin/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  t.like(await opened.json(), { error: { code: 'token_sign_in_disabled' } });
  t.is(opened.status, 403);
  t.is((await gateway.fetch(`${app.url}/admin/v1/keys`, { headers: { authorization: `Bearer ${token}` } })).status, 200);
  t.like(await (await gateway.fetch(`${app.url}/admin/v1/oidc`)).json(), { token_sign_in: false });
  t.deepEqual(gateway.problems, [], 'every answer as docs/openapi.json describes it');
});

test.serial('a session unused for the idle timeout ends; one in use lives to its lifetime; sign-out ends it', async (t) => {
  const gateway = await sharedGateway();
  const vera = await signedIn(gateway, 'vera');
  const otto = await signedIn(gateway, 'otto');
  for (let step = 0; step < 2; step++) {
    gateway.clock.seconds += 500;
    t.is((await vera.call('GET', '/keys')).status, 200, 'in use');
  }
  gateway.clock.seconds += 500;
  t.is((await vera.call('GET', '/keys')).status, 200, 'in use, 1500 s in');
  t.is((await otto.call('GET', '/keys')).status, 401, 'idle for 1500 s');
  gateway.clock.seconds += 301;
  t.is((await vera.call('GET', '/keys')).status, 401, 'past its lifetime');
  const ada = await signedIn(gateway, 'ada');
  t.is((await ada.call('DELETE', '/sessions/current')).status, 204);
  t.is((await ada.call('GET', '/keys')).status, 401);
  t.deepEqual(gateway.problems, [], 'every answer as docs/openapi.json describes it');
});

withPostgres(test)('on PostgreSQL, a session opened on one server works on another, and after a restart', async (t) => {
  const database = await throwawayPostgres();
  t.teardown(() => database.drop());
  const gateway = await ssoGateway((cleanup) => t.teardown(cleanup), { DATABASE_URL: database.url });
  const otto = await signedIn(gateway, 'otto');
  const other = await referenceApp(undefined, { ...gateway.env, DATABASE_URL: database.url });
  t.teardown(() => other.close());
  t.is((await otto.call('POST', '/keys', { account: 'acme' }, other)).status, 201);
  await other.close();
  const restarted = await referenceApp(undefined, { ...gateway.env, DATABASE_URL: database.url });
  t.teardown(() => restarted.close());
  t.like(await (await otto.call('GET', '/sessions/current', undefined, restarted)).json(), { role: 'operator', user: { email: 'otto@example.com' } });
  // The provider's logout, received by one server, ends the session on every one.
  const sid = gateway.provider.sessionIds('otto')[0];
  t.is((await backchannelLogout(gateway, await gateway.provider.logoutToken({ sub: 'otto', sid }), restarted)).status, 200);
  t.is((await otto.call('GET', '/keys')).status, 401);
  t.deepEqual(gateway.problems, [], 'every answer as docs/openapi.json describes it');
});

test('signing out at the provider ends that sign-in here (back-channel), another by its sid (front-channel); the dashboard sends the browser there', async (t) => {
  const gateway = await sharedGateway();
  const { app, provider } = gateway;
  const first = await signedIn(gateway, 'lena');
  const second = await signedIn(gateway, 'lena');
  // RP-initiated logout: to the provider's end-session page, back to the dashboard afterwards.
  const logout = await gateway.fetch(`${app.url}/admin/v1/oidc/logout`, { redirect: 'manual' });
  t.is(logout.status, 303);
  const endSession = new URL(logout.headers.get('location') ?? '');
  t.is(endSession.origin, provider.issuer);
  t.like(Object.fromEntries(endSession.searchParams), { client_id: OIDC_CLIENT.id, post_logout_redirect_uri: `${app.url}/dashboard` });
  // The first browser confirms there: the provider posts its logout token to the gateway.
  const page = await fetch(endSession, { headers: { cookie: first.providerCookie } });
  const xsrf = /name="xsrf" value="([^"]+)"/.exec(await page.text())?.[1] ?? '';
  const action = new URL('/session/end/confirm', provider.issuer);
  const confirmed = await fetch(action, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: first.providerCookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ xsrf, logout: 'yes' }).toString(),
  });
  t.is(confirmed.headers.get('location'), `${app.url}/dashboard`);
  t.is((await first.call('GET', '/keys')).status, 401, 'the session of the sign-in that ended at the provider');
  t.is((await second.call('GET', '/keys')).status, 200, 'another sign-in of the same person');
  // Front-channel: the provider's page frames the gateway's logout with the session's sid and its
  // issuer (or none, as Entra ID sends it).
  const [sid = ''] = provider.sessionIds('lena');
  const frontchannel = (query: Record<string, string>) => gateway.fetch(`${app.url}/admin/v1/oidc/frontchannel-logout?${new URLSearchParams(query)}`);
  t.is((await frontchannel({ iss: 'https://elsewhere.example.com', sid })).status, 400);
  t.is((await frontchannel({ iss: provider.issuer })).status, 400);
  t.is((await second.call('GET', '/keys')).status, 200);
  const framed = await frontchannel({ iss: provider.issuer, sid });
  t.is(framed.status, 200);
  t.is(framed.headers.get('content-security-policy'), `default-src 'none'; frame-ancestors ${provider.issuer}`);
  t.is((await second.call('GET', '/keys')).status, 401);
  const third = await signedIn(gateway, 'lena');
  const [latest = ''] = provider.sessionIds('lena').filter((id) => id !== sid);
  t.is((await frontchannel({ sid: latest })).status, 200);
  t.is((await third.call('GET', '/keys')).status, 401);
  t.deepEqual(gateway.problems, [], 'every answer as docs/openapi.json describes it');
});

test('a back-channel logout that names only the person ends all their sessions; one that does not verify ends none', async (t) => {
  const gateway = await sharedGateway();
  const { provider } = gateway;
  const sessions = [await signedIn(gateway, 'finn'), await signedIn(gateway, 'finn')];
  const alive = async () => Promise.all(sessions.map(async (session) => (await session.call('GET', '/keys')).status));
  const { privateKey: stranger } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const forged = await new SignJWT({ sub: 'finn', events: { 'http://schemas.openid.net/event/backchannel-logout': {} } })
    .setProtectedHeader({ alg: 'RS256', kid: 'test' })
    .setIssuer(provider.issuer)
    .setAudience(OIDC_CLIENT.id)
    .setIssuedAt()
    .sign(stranger);
  for (const token of [
    forged,
    await provider.logoutToken({ sub: 'finn', events: undefined }),
    await provider.logoutToken({ sub: 'finn', events: { 'http://schemas.openid.net/event/other': {} } }),
    await provider.logoutToken({ sub: 'finn', nonce: 'n' }),
    await provider.logoutToken({ sub: 'finn', aud: 'another-client' }),
    await provider.logoutToken({ sub: 'finn', iss: 'https://elsewhere.example.com' }),
    await provider.logoutToken({}),
    'not-a-jwt',
  ]) {
    const refused = await backchannelLogout(gateway, token);
    t.is(refused.status, 400);
    t.like(await refused.json(), { error: 'invalid_request' });
  }
  const formless = await gateway.fetch(`${gateway.app.url}/admin/v1/oidc/backchannel-logout`, { method: 'POST', body: '' });
  t.is(formless.status, 400);
  t.deepEqual(await alive(), [200, 200]);
  // Someone who never signed in here: nothing to end.
  t.is((await backchannelLogout(gateway, await provider.logoutToken({ sub: 'nobody' }))).status, 200);
  t.deepEqual(await alive(), [200, 200]);
  const ended = await backchannelLogout(gateway, await provider.logoutToken({ sub: 'finn' }));
  t.is(ended.status, 200);
  t.is(ended.headers.get('cache-control'), 'no-store');
  t.deepEqual(await alive(), [401, 401]);
  t.deepEqual(gateway.problems, [], 'every answer as docs/openapi.json describes it');
});

test('an http:// issuer is accepted only on a loopback address; OIDC needs a client id and a PUBLIC_URL', (t) => {
  const base = { DATA_DIR: '/tmp/kmg-sso-config', OIDC_CLIENT_ID: 'c', PUBLIC_URL: 'https://gw.example.com' };
  t.like(loadConfig({ ...base, OIDC_ISSUER: 'http://127.0.0.1:9000' }).dashboard.oidc, { redirectUri: 'https://gw.example.com/admin/v1/oidc/callback' });
  t.truthy(loadConfig({ ...base, OIDC_ISSUER: 'https://id.example.com' }).dashboard.oidc);
  for (const env of [
    { ...base, OIDC_ISSUER: 'http://id.example.com' },
    { ...base, OIDC_ISSUER: 'https://id.example.com', OIDC_CLIENT_ID: '' },
    { ...base, OIDC_ISSUER: 'https://id.example.com', PUBLIC_URL: '' },
    { ...base, OIDC_ISSUER: 'https://id.example.com', OIDC_ROLES: 'admins=root' },
  ]) {
    t.throws(() => loadConfig(env), { instanceOf: ConfigError });
  }
});
