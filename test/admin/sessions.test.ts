import test from 'ava';
import { parse as parseCookies, parseSetCookie } from 'cookie';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import { adminApp } from '../helpers/admin-app.js';

const app = await adminApp({ ttlSeconds: 3600 });
test.after.always(() => app.close());
test.after('every answer agrees with docs/openapi.json', (t) => t.deepEqual(app.problems, []));

interface Session {
  cookie: string;
  csrf: string;
  setCookie: string;
}

async function logIn(headers: Record<string, string> = {}, token = app.token): Promise<Session> {
  const response = await app.fetch(`${app.url}/admin/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, ...headers } });
  if (response.status !== 201) throw new Error(`log in failed: ${response.status} ${await response.text()}`);
  const setCookie = response.headers.get('set-cookie') ?? '';
  const value = parseCookies(setCookie).kmg_admin_session ?? '';
  const body = (await response.json()) as { csrf_token: string };
  return { cookie: `kmg_admin_session=${value}`, csrf: body.csrf_token, setCookie };
}

const withSession = (session: Session, method: string, path: string, options: { csrf?: string; body?: unknown } = {}) =>
  app.fetch(`${app.url}/admin/v1${path}`, {
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
  t.false(session.setCookie.includes(app.token), 'the cookie is not the token');
  // Kept as a hash only.
  t.is(await app.sessions.get(value, app.clock.seconds), undefined);
  const behindProxy = await logIn({ 'x-forwarded-proto': 'https' });
  t.true(parseSetCookie(behindProxy.setCookie).secure);
});

test.serial('a session reads with the cookie alone, and changes only with its own X-CSRF-Token', async (t) => {
  const session = await logIn();
  const other = await logIn();
  t.is((await withSession(session, 'GET', '/keys')).status, 200);
  t.like(await (await withSession(session, 'GET', '/sessions/current')).json(), { admin_token_id: app.tokenId, csrf_token: session.csrf });
  const before = (await app.keys.list()).length;
  for (const csrf of [undefined, '', other.csrf, `${session.csrf}x`]) {
    const refused = await withSession(session, 'POST', '/keys', { ...(csrf === undefined ? {} : { csrf }), body: { account: 'acme' } });
    t.is(refused.status, 403);
    t.is(await errorCode(refused), 'invalid_csrf_token');
  }
  t.is((await app.keys.list()).length, before, 'a refused request changed nothing');
  const created = await withSession(session, 'POST', '/keys', { csrf: session.csrf, body: { account: 'acme' } });
  t.is(created.status, 201);
  t.like(app.changes.at(-1), { action: 'key.created', adminTokenId: app.tokenId });
});

test.serial('a session ends when it expires, when it logs out, and when its admin token is revoked', async (t) => {
  const expiring = await logIn();
  app.clock.seconds += 3599;
  t.is((await withSession(expiring, 'GET', '/keys')).status, 200);
  app.clock.seconds += 1;
  const expired = await withSession(expiring, 'GET', '/keys');
  t.is(expired.status, 401);
  t.is(await errorCode(expired), 'invalid_admin_token');

  const fresh = await logIn();
  const loggedOut = await withSession(fresh, 'DELETE', '/sessions/current', { csrf: fresh.csrf });
  t.is(loggedOut.status, 204);
  t.like(parseSetCookie(loggedOut.headers.get('set-cookie') ?? ''), { name: 'kmg_admin_session', value: '', maxAge: 0 });
  t.is((await withSession(fresh, 'GET', '/keys')).status, 401);

  const { token, record } = await createAdminToken(app.tokens, { prefix: 'kmg' });
  const revoked = await logIn({}, token);
  t.is((await withSession(revoked, 'GET', '/keys')).status, 200);
  await app.tokens.revoke(record.id);
  t.is((await withSession(revoked, 'GET', '/keys')).status, 401);
});

test.serial('the session names its admin token, by the name it was created with, or null when it has none', async (t) => {
  t.like(await (await withSession(await logIn(), 'GET', '/sessions/current')).json(), { admin_token_id: app.tokenId, admin_token_name: null });
  const { token, record } = await createAdminToken(app.tokens, { prefix: 'kmg', name: 'ops console' });
  const response = await app.fetch(`${app.url}/admin/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  t.like(await response.json(), { admin_token_id: record.id, admin_token_name: 'ops console' });
  t.like(await (await withSession(await logIn({}, token), 'GET', '/sessions/current')).json(), { admin_token_name: 'ops console' });
});

test.serial('a session cannot open another one, which would outlive it: the token itself is needed', async (t) => {
  const session = await logIn();
  const response = await withSession(session, 'POST', '/sessions', { csrf: session.csrf });
  t.is(response.status, 403);
  t.is(await errorCode(response), 'admin_token_required');
});
