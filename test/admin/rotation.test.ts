import test from 'ava';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import { adminApp } from '../helpers/admin-app.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { withPostgres } from '../helpers/services.js';
import { referenceApp } from '../spec/reference-app.js';

const app = await adminApp();
test.after.always(() => app.close());
test.after('every answer agrees with docs/openapi.json', (t) => t.deepEqual(app.problems, []));

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
  const response = await app.admin('POST', '/keys', { account: 'acme', ...body });
  if (response.status !== 201) throw new Error(`create failed: ${response.status} ${await response.text()}`);
  return (await response.json()) as KeyBody;
}

// These tests move one shared clock: they run one at a time.
test.serial('rotate: a new key with the same account, scopes, models, limits and expiry; the old one works until the grace ends', async (t) => {
  const expiresAt = app.clock.seconds + 86_400;
  const old = await newKey({ scopes: ['models:read'], models: ['echo-2'], limits: { tokens_per_day: 5000 }, expires_at: expiresAt });
  const started = app.clock.seconds;
  const response = await app.admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: 60 });
  t.is(response.status, 201);
  const rotated = (await response.json()) as KeyBody;
  t.not(rotated.id, old.id);
  t.regex(rotated.key, /^kmg_sk_[A-Za-z0-9_-]{43}$/);
  t.like(rotated, { account: 'acme', scopes: ['models:read'], models: ['echo-2'], expires_at: expiresAt, status: 'active' });
  t.deepEqual(rotated.limits, { requests_per_minute: null, tokens_per_minute: null, tokens_per_day: 5000, cost_per_day: null, cost_per_month: null });
  t.deepEqual(rotated.replaces, { id: old.id, expires_at: started + 60 });

  app.clock.seconds = started + 59;
  t.is(await app.whoami(old.key), 200);
  app.clock.seconds = started + 60;
  t.is(await app.whoami(old.key), 401);
  t.is(await app.whoami(rotated.key), 200);
  t.like(await (await app.admin('GET', `/keys/${old.id}`)).json(), { status: 'expired', expires_at: started + 60 });
});

test.serial('rotate with grace_seconds 0 cuts the old key off at once', async (t) => {
  const old = await newKey();
  t.is(await app.whoami(old.key), 200);
  const rotated = (await (await app.admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: 0 })).json()) as KeyBody;
  t.is(await app.whoami(old.key), 401);
  t.is(await app.whoami(rotated.key), 200);
});

test.serial('rotate never lengthens the old key: an expiry sooner than the grace stays', async (t) => {
  const expiresAt = app.clock.seconds + 30;
  const old = await newKey({ expires_at: expiresAt });
  const rotated = (await (await app.admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: 3600 })).json()) as KeyBody;
  t.deepEqual(rotated.replaces, { id: old.id, expires_at: expiresAt });
});

test.serial('only an active key can be rotated: a revoked or expired one is 409, an unknown one 404, and no key is made', async (t) => {
  const revoked = await newKey();
  await app.admin('POST', `/keys/${revoked.id}/revoke`);
  const expired = await newKey({ expires_at: app.clock.seconds + 10 });
  app.clock.seconds += 10;
  const before = (await app.keys.list()).length;
  for (const id of [revoked.id, expired.id]) {
    const response = await app.admin('POST', `/keys/${id}/rotate`, { grace_seconds: 60 });
    t.is(response.status, 409);
    t.is(((await response.json()) as { error: { code: string } }).error.code, 'key_not_active');
  }
  t.is((await app.admin('POST', '/keys/key_doesnotexist/rotate', { grace_seconds: 60 })).status, 404);
  t.is((await app.keys.list()).length, before);
});

test.serial('expiry is checked against the clock: a time not after now is 400, one second later is accepted', async (t) => {
  t.is((await app.admin('POST', '/keys', { account: 'acme', expires_at: app.clock.seconds })).status, 400);
  t.is((await app.admin('POST', '/keys', { account: 'acme', expires_at: app.clock.seconds + 1 })).status, 201);
});

test.serial('a key in its grace period is not rotated again: 409 key_already_rotated, and its replacement keeps the original expiry', async (t) => {
  const expiresAt = app.clock.seconds + 86_400;
  const old = await newKey({ expires_at: expiresAt });
  const first = await app.admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: 60 });
  t.is(first.status, 201);
  const replacement = (await first.json()) as KeyBody;
  const before = (await app.keys.list()).length;
  for (const grace of [60, 0]) {
    const again = await app.admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: grace });
    t.is(again.status, 409);
    t.like(await again.json(), { error: { type: 'invalid_request_error', code: 'key_already_rotated', param: null } });
  }
  t.is((await app.keys.list()).length, before, 'no key is made');
  t.is(await app.whoami(old.key), 200, 'the old key still works until its grace ends');
  // The replacement is rotated in its turn, and its own replacement keeps the original expiry too.
  const next = (await (await app.admin('POST', `/keys/${replacement.id}/rotate`, { grace_seconds: 60 })).json()) as KeyBody;
  t.like(next, { expires_at: expiresAt, status: 'active' });
  app.clock.seconds += 61;
  t.is(await app.whoami(old.key), 401);
  t.is(await app.whoami(replacement.key), 401);
  t.is(await app.whoami(next.key), 200);
});

test.serial('ten rotations of one key at once make exactly one new key; the others are 409', async (t) => {
  const old = await newKey({ account: 'parallel-rotation' });
  const statuses = await Promise.all(
    Array.from({ length: 10 }, async () => (await app.admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: 60 })).status),
  );
  t.deepEqual(statuses.sort(), [201, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
  t.is((await app.keys.list({ account: 'parallel-rotation' })).length, 2);
});

// The same rules on the reference server's own stores: SQLite, and PostgreSQL.
for (const [name, gated, database] of [
  ['sqlite', test, async () => ({ env: {}, drop: async () => undefined })],
  [
    'postgres',
    withPostgres(test),
    async () => {
      const db = await throwawayPostgres();
      return { env: { DATABASE_URL: db.url }, drop: db.drop };
    },
  ],
] as const) {
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
