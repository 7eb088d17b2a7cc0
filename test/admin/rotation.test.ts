import test from 'ava';
import { adminApp } from '../helpers/admin-app.js';

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
