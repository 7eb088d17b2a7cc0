import test from 'ava';
import { parse as parseCookies, parseSetCookie } from 'cookie';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import { adminApp } from '../helpers/admin-app.js';
import { serverDatabases } from '../helpers/server-database.js';
import { referenceApp } from '../helpers/reference-app.js';

// Key rotation and admin sessions, on the admin API composed from lib/ in memory (test/helpers/
// admin-app.ts), each on an app of its own whose clock the tests move: those tests run one at a
// time. Rotation then on the reference server's own stores too.

// Every top-level await before the first test or hook: AVA takes declarations only until an await
// that waits on I/O.
const rotationApp = await adminApp();
const sessionApp = await adminApp({ ttlSeconds: 3600 });
test.after.always(() => Promise.all([rotationApp.close(), sessionApp.close()]));
test.after('every answer agrees with docs/openapi.json', (t) => t.deepEqual([...rotationApp.problems, ...sessionApp.problems], []));

interface KeyBody {
  id: string;
  key: string;
  account: string;
  scopes: string[];
  models: string[] | null;
  limits: Record<string, number | null> | null;
  expires_at: number | null;
  status: string;
  replaces?: { id: string; expires_at: number };
}

async function newKey(body: Record<string, unknown> = {}): Promise<KeyBody> {
  const response = await rotationApp.admin('POST', '/keys', { account: 'acme', ...body });
  if (response.status !== 201) throw new Error(`create failed: ${response.status} ${await response.text()}`);
  return (await response.json()) as KeyBody;
}

// These tests move one shared clock: they run one at a time.
test.serial('rotate: a new key with the same account, scopes, models, limits and expiry; the old one works until the grace ends', async (t) => {
  const expiresAt = rotationApp.clock.seconds + 86_400;
  const old = await newKey({ scopes: ['models:read'], models: ['echo-2'], limits: { tokens_per_day: 5000 }, expires_at: expiresAt });
  const started = rotationApp.clock.seconds;
  const response = await rotationApp.admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: 60 });
  t.is(response.status, 201);
  const rotated = (await response.json()) as KeyBody;
  t.not(rotated.id, old.id);
  t.regex(rotated.key, /^kmg_sk_[A-Za-z0-9_-]{43}$/);
  t.like(rotated, { account: 'acme', scopes: ['models:read'], models: ['echo-2'], expires_at: expiresAt, status: 'active' });
  t.deepEqual(rotated.limits, {
    requests_per_minute: null,
    tokens_per_minute: null,
    tokens_per_day: 5000,
    cost_per_day: null,
    cost_per_month: null,
    cost_soft: null,
    cost_alert_thresholds: null,
  });
  t.deepEqual(rotated.replaces, { id: old.id, expires_at: started + 60 });

  rotationApp.clock.seconds = started + 59;
  t.is(await rotationApp.whoami(old.key), 200);
  rotationApp.clock.seconds = started + 60;
  t.is(await rotationApp.whoami(old.key), 401);
  t.is(await rotationApp.whoami(rotated.key), 200);
  t.like(await (await rotationApp.admin('GET', `/keys/${old.id}`)).json(), { status: 'expired', expires_at: started + 60 });
});

test.serial('rotate with grace_seconds 0 cuts the old key off at once', async (t) => {
  const old = await newKey();
  t.is(await rotationApp.whoami(old.key), 200);
  const rotated = (await (await rotationApp.admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: 0 })).json()) as KeyBody;
  t.is(await rotationApp.whoami(old.key), 401);
  t.is(await rotationApp.whoami(rotated.key), 200);
});

test.serial('rotate never lengthens the old key: an expiry sooner than the grace stays', async (t) => {
  const expiresAt = rotationApp.clock.seconds + 30;
  const old = await newKey({ expires_at: expiresAt });
  const rotated = (await (await rotationApp.admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: 3600 })).json()) as KeyBody;
  t.deepEqual(rotated.replaces, { id: old.id, expires_at: expiresAt });
});

test.serial('only an active key can be rotated: a revoked or expired one is 409, an unknown one 404, and no key is made', async (t) => {
  const revoked = await newKey();
  await rotationApp.admin('POST', `/keys/${revoked.id}/revoke`);
  const expired = await newKey({ expires_at: rotationApp.clock.seconds + 10 });
  rotationApp.clock.seconds += 10;
  const before = (await rotationApp.keys.list()).length;
  for (const id of [revoked.id, expired.id]) {
    const response = await rotationApp.admin('POST', `/keys/${id}/rotate`, { grace_seconds: 60 });
    t.is(response.status, 409);
    t.is(((await response.json()) as { error: { code: string } }).error.code, 'key_not_active');
  }
  t.is((await rotationApp.admin('POST', '/keys/key_doesnotexist/rotate', { grace_seconds: 60 })).status, 404);
  t.is((await rotationApp.keys.list()).length, before);
});

test.serial('expiry is checked against the clock: a time not after now is 400, one second later is accepted', async (t) => {
  t.is((await rotationApp.admin('POST', '/keys', { account: 'acme', expires_at: rotationApp.clock.seconds })).status, 400);
  t.is((await rotationApp.admin('POST', '/keys', { account: 'acme', expires_at: rotationApp.clock.seconds + 1 })).status, 201);
});

test.serial('a key in its grace period is not rotated again: 409 key_already_rotated, and its replacement keeps the original expiry', async (t) => {
  const expiresAt = rotationApp.clock.seconds + 86_400;
  const old = await newKey({ expires_at: expiresAt });
  const first = await rotationApp.admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: 60 });
  t.is(first.status, 201);
  const replacement = (await first.json()) as KeyBody;
  const before = (await rotationApp.keys.list()).length;
  for (const grace of [60, 0]) {
    const again = await rotationApp.admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: grace });
    t.is(again.status, 409);
    t.like(await again.json(), { error: { type: 'invalid_request_error', code: 'key_already_rotated', param: null } });
  }
  t.is((await rotationApp.keys.list()).length, before, 'no key is made');
  t.is(await rotationApp.whoami(old.key), 200, 'the old key still works until its grace ends');
  // The replacement is rotated in its turn, and its own replacement keeps the original expiry too.
  const next = (await (await rotationApp.admin('POST', `/keys/${replacement.id}/rotate`, { grace_seconds: 60 })).json()) as KeyBody;
  t.like(next, { expires_at: expiresAt, status: 'active' });
  rotationApp.clock.seconds += 61;
  t.is(await rotationApp.whoami(old.key), 401);
  t.is(await rotationApp.whoami(replacement.key), 401);
  t.is(await rotationApp.whoami(next.key), 200);
});

test.serial('ten rotations of one key at once make exactly one new key; the others are 409', async (t) => {
  const old = await newKey({ account: 'parallel-rotation' });
  const statuses = await Promise.all(
    Array.from({ length: 10 }, async () => (await rotationApp.admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: 60 })).status),
  );
  t.deepEqual(statuses.sort(), [201, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
  t.is((await rotationApp.keys.list({ account: 'parallel-rotation' })).length, 2);
});

// The same rules on the reference server's own stores: SQLite, and PostgreSQL.
for (const [name, gated, database] of serverDatabases(test)) {
  gated(`${name}: ten rotation requests at once make one key, a retry is 409 key_already_rotated, and the replacement keeps the original expiry`, async (t) => {
    const { env, drop } = await database();
    t.teardown(drop);
    const server = await referenceApp(undefined, env);
    t.teardown(() => server.close());
    const { token } = await createAdminToken(server.deployment.adminTokens, { prefix: server.config.gateway.keyPrefix });
    const call = (path: string, body: unknown) =>
      fetch(`${server.url}/admin/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: JSON.stringify(body) });
    const expiresAt = Math.floor(Date.now() / 1000) + 86_400;
    const old = (await (await call('/keys', { account: 'rotated', expires_at: expiresAt })).json()) as KeyBody;
    const answers = await Promise.all(Array.from({ length: 10 }, () => call(`/keys/${old.id}/rotate`, { grace_seconds: 60 })));
    t.deepEqual(answers.map((answer) => answer.status).sort(), [201, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
    const replacement = (await answers.find((answer) => answer.status === 201)?.json()) as KeyBody;
    t.like(replacement, { account: 'rotated', expires_at: expiresAt, status: 'active' });
    const retry = await call(`/keys/${old.id}/rotate`, { grace_seconds: 60 });
    t.is(retry.status, 409);
    t.like(await retry.json(), { error: { type: 'invalid_request_error', code: 'key_already_rotated', param: null } });
    t.is((await server.deployment.keys.list({ account: 'rotated' })).length, 2);
    t.like(await (await call(`/keys/${replacement.id}/rotate`, { grace_seconds: 0 })).json(), { expires_at: expiresAt });
  });
}

interface Session {
  cookie: string;
  csrf: string;
  setCookie: string;
}

async function logIn(headers: Record<string, string> = {}, token = sessionApp.token): Promise<Session> {
  const response = await sessionApp.fetch(`${sessionApp.url}/admin/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, ...headers } });
  if (response.status !== 201) throw new Error(`log in failed: ${response.status} ${await response.text()}`);
  const setCookie = response.headers.get('set-cookie') ?? '';
  const value = parseCookies(setCookie).kmg_admin_session ?? '';
  const body = (await response.json()) as { csrf_token: string };
  return { cookie: `kmg_admin_session=${value}`, csrf: body.csrf_token, setCookie };
}

const withSession = (session: Session, method: string, path: string, options: { csrf?: string; body?: unknown } = {}) =>
  sessionApp.fetch(`${sessionApp.url}/admin/v1${path}`, {
    method,
    headers: { cookie: session.cookie, ...(options.csrf === undefined ? {} : { 'x-csrf-token': options.csrf }) },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  });

const errorCode = async (response: Response) => ((await response.json()) as { error: { code: string } }).error.code;

test.serial('logging in with the admin token sets an HttpOnly, SameSite=Strict cookie for the admin API only, Secure behind TLS', async (t) => {
  const session = await logIn();
  const cookie = parseSetCookie(session.setCookie);
  t.like(cookie, { name: 'kmg_admin_session', httpOnly: true, sameSite: 'strict', path: '/admin/v1', maxAge: 3600 });
  t.falsy(cookie.secure, 'plain HTTP: a Secure cookie would never come back');
  const value = cookie.value ?? '';
  t.regex(value, /^[A-Za-z0-9_-]{43}$/);
  t.false(session.setCookie.includes(sessionApp.token), 'the cookie is not the token');
  // Kept as a hash only.
  t.is(await sessionApp.sessions.get(value, sessionApp.clock.seconds), undefined);
  const behindProxy = await logIn({ 'x-forwarded-proto': 'https' });
  t.true(parseSetCookie(behindProxy.setCookie).secure);
});

test.serial('a session reads with the cookie alone, and changes only with its own X-CSRF-Token', async (t) => {
  const session = await logIn();
  const other = await logIn();
  t.is((await withSession(session, 'GET', '/keys')).status, 200);
  t.like(await (await withSession(session, 'GET', '/sessions/current')).json(), { admin_token_id: sessionApp.tokenId, csrf_token: session.csrf });
  const before = (await sessionApp.keys.list()).length;
  for (const csrf of [undefined, '', other.csrf, `${session.csrf}x`]) {
    const refused = await withSession(session, 'POST', '/keys', { ...(csrf === undefined ? {} : { csrf }), body: { account: 'acme' } });
    t.is(refused.status, 403);
    t.is(await errorCode(refused), 'invalid_csrf_token');
  }
  t.is((await sessionApp.keys.list()).length, before, 'a refused request changed nothing');
  const created = await withSession(session, 'POST', '/keys', { csrf: session.csrf, body: { account: 'acme' } });
  t.is(created.status, 201);
  t.like(sessionApp.changes.at(-1), { action: 'key.created', adminTokenId: sessionApp.tokenId });
});

test.serial('a session ends when it expires, when it logs out, and when its admin token is revoked', async (t) => {
  const expiring = await logIn();
  sessionApp.clock.seconds += 3599;
  t.is((await withSession(expiring, 'GET', '/keys')).status, 200);
  sessionApp.clock.seconds += 1;
  const expired = await withSession(expiring, 'GET', '/keys');
  t.is(expired.status, 401);
  t.is(await errorCode(expired), 'invalid_admin_token');

  const fresh = await logIn();
  const loggedOut = await withSession(fresh, 'DELETE', '/sessions/current', { csrf: fresh.csrf });
  t.is(loggedOut.status, 204);
  t.like(parseSetCookie(loggedOut.headers.get('set-cookie') ?? ''), { name: 'kmg_admin_session', value: '', maxAge: 0 });
  t.is((await withSession(fresh, 'GET', '/keys')).status, 401);

  const { token, record } = await createAdminToken(sessionApp.tokens, { prefix: 'kmg' });
  const revoked = await logIn({}, token);
  t.is((await withSession(revoked, 'GET', '/keys')).status, 200);
  await sessionApp.tokens.revoke(record.id);
  t.is((await withSession(revoked, 'GET', '/keys')).status, 401);
});

test.serial('the session names its admin token, by the name it was created with, or null when it has none', async (t) => {
  t.like(await (await withSession(await logIn(), 'GET', '/sessions/current')).json(), { admin_token_id: sessionApp.tokenId, admin_token_name: null });
  const { token, record } = await createAdminToken(sessionApp.tokens, { prefix: 'kmg', name: 'ops console' });
  const response = await sessionApp.fetch(`${sessionApp.url}/admin/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  t.like(await response.json(), { admin_token_id: record.id, admin_token_name: 'ops console' });
  t.like(await (await withSession(await logIn({}, token), 'GET', '/sessions/current')).json(), { admin_token_name: 'ops console' });
});

test.serial('a session cannot open another one, which would outlive it: the token itself is needed', async (t) => {
  const session = await logIn();
  const response = await withSession(session, 'POST', '/sessions', { csrf: session.csrf });
  t.is(response.status, 403);
  t.is(await errorCode(response), 'admin_token_required');
});
