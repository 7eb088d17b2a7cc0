import test from 'ava';
import { apiKey, type ApiKeyOptions } from '../../lib/auth/api-key.js';
import { generateApiKey, hashApiKey, rotateApiKey } from '../../lib/auth/keys.js';
import { requireScope } from '../../lib/auth/require-scope.js';
import { SCOPES, type Scope } from '../../lib/auth/scopes.js';
import type { ModelLimits } from '../../lib/quota/model-limits.js';
import { authApp, OPERATIONS } from '../helpers/auth-app.js';
import { listen, type Listening } from '../helpers/http.js';

const { app, store, keyFor } = authApp();
let server: Listening;
test.before(async () => {
  server = await listen(app);
});
test.after.always(() => server.close());

const call = (method: string, path: string, headers: Record<string, string> = {}) =>
  fetch(server.url + path, { method, headers });

const INVALID_KEY_A = { error: { message: 'Invalid API key', type: 'authentication_error', param: null, code: 'invalid_api_key' } };
const FORBIDDEN_A = { error: { message: 'Forbidden', type: 'permission_error', param: null, code: 'forbidden' } };

function expectedBody(path: string, status: 401 | 403, requestId: string) {
  if (path !== '/v1/messages') return status === 401 ? INVALID_KEY_A : FORBIDDEN_A;
  const error = status === 401 ? { type: 'authentication_error', message: 'Invalid API key' } : { type: 'permission_error', message: 'Forbidden' };
  return { type: 'error', error, request_id: requestId };
}

const requestIdOf = (res: Response, path: string) =>
  res.headers.get(path === '/v1/messages' ? 'request-id' : 'x-request-id') ?? '';

test('generated keys are <prefix>_sk_ and 256 random bits, stored only as their SHA-256', async (t) => {
  const { key, hash } = generateApiKey('kmg');
  t.regex(key, /^kmg_sk_[A-Za-z0-9_-]{43}$/);
  t.is(Buffer.from(key.slice('kmg_sk_'.length), 'base64url').length, 32);
  t.is(hash, hashApiKey(key));
  t.regex(hash, /^[0-9a-f]{64}$/);
  t.not(generateApiKey('kmg').key, key);
  const { key: created, record } = await keyFor();
  t.false(JSON.stringify(await store.list()).includes(created));
  t.is(record.hash, hashApiKey(created));
});

test('the stored hash is SHA-256 hex: keys stored by earlier versions still match', (t) => {
  // FIPS 180-2's test vector.
  t.is(hashApiKey('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
});

test('a bad key prefix is refused at creation, not at request time', (t) => {
  t.throws(() => generateApiKey('kmg_sk'), { message: /koa-model-gateway/ });
});

test('apiKey() without a store and requireScope() with an unknown scope are refused when made, not at request time', (t) => {
  t.throws(() => apiKey({} as ApiKeyOptions), { instanceOf: TypeError, message: 'koa-model-gateway: apiKey() needs a KeyStore as `store`' });
  t.throws(() => requireScope('files:wirte' as Scope), { instanceOf: TypeError, message: /^koa-model-gateway: requireScope\(\): unknown scope "files:wirte"/ });
});

const rejected: Array<[string, Record<string, string>]> = [
  ['no key', {}],
  ['Basic credentials', { authorization: 'Basic dXNlcjpwYXNz' }],
  ['Bearer with no token', { authorization: 'Bearer' }],
  ['Bearer with extra parts', { authorization: 'Bearer kmg_sk_a kmg_sk_b' }],
  ['unknown key as Bearer', { authorization: 'Bearer kmg_sk_unknown' }],
  ['unknown key as x-api-key', { 'x-api-key': 'kmg_sk_unknown' }],
  ['blank x-api-key and nothing else', { 'x-api-key': '  ' }],
];

// apiKey() runs before every route alike: one route of each error shape stands for them all.
const SHAPED_ROUTES = [
  { method: 'GET', path: '/v1/files' },
  { method: 'POST', path: '/v1/messages' },
];

for (const [title, headers] of rejected) {
  test(`401 Invalid API key in the route's shape: ${title}`, async (t) => {
    for (const { method, path } of SHAPED_ROUTES) {
      const res = await call(method, path, headers);
      t.is(res.status, 401, path);
      t.deepEqual(await res.json(), expectedBody(path, 401, requestIdOf(res, path)), path);
      t.regex(requestIdOf(res, path), /^req_[A-Za-z0-9]{32}$/, path);
    }
  });
}

test('x-api-key wins over a valid Authorization header, even when x-api-key is unknown', async (t) => {
  const first = await keyFor(['files:read'], { account: 'first' });
  const second = await keyFor(['files:read'], { account: 'second' });
  const res = await call('GET', '/v1/files', { 'x-api-key': first.key, authorization: `Bearer ${second.key}` });
  t.is(res.status, 200);
  t.is(((await res.json()) as { key: { account: string } }).key.account, 'first');
  const unknown = await call('GET', '/v1/files', { 'x-api-key': 'kmg_sk_unknown', authorization: `Bearer ${second.key}` });
  t.is(unknown.status, 401);
  t.deepEqual(await unknown.json(), INVALID_KEY_A);
});

test('a blank x-api-key falls back to a valid Bearer key', async (t) => {
  const valid = await keyFor();
  t.is((await call('GET', '/v1/files', { 'x-api-key': ' ', authorization: `Bearer ${valid.key}` })).status, 200);
});

test('the verified key lands on ctx.state with its account, scopes and allowlist, never the key', async (t) => {
  const { key, record } = await keyFor(['files:read'], { models: ['echo-1'], account: 'state' });
  const res = await call('GET', '/v1/files', { authorization: `Bearer ${key}` });
  const body = (await res.json()) as { key: unknown };
  t.deepEqual(body.key, { id: record.id, account: 'state', scopes: ['files:read'], models: ['echo-1'] });
  t.false(JSON.stringify(body).includes(key));
});

test("a key's own limits on model calls land on ctx.state with it", async (t) => {
  const { key } = await keyFor(['files:read'], { limits: { requestsPerMinute: 5, tokensPerDay: 900 } });
  const body = (await (await call('GET', '/v1/files', { authorization: `Bearer ${key}` })).json()) as { key: { limits: unknown } };
  t.deepEqual(body.key.limits, { requestsPerMinute: 5, tokensPerDay: 900 });
});

test('createApiKey refuses limits that are not positive integers, before anything is stored', async (t) => {
  for (const limits of [{ requestsPerMinute: 0 }, { tokensPerMinute: 2.5 }, { tokensPerDay: -1 }, { requestsPerHour: 5 }]) {
    await t.throwsAsync(keyFor(['files:read'], { limits: limits as ModelLimits, account: 'bad-limits' }), {
      instanceOf: TypeError,
      message: /^koa-model-gateway: key limits: /,
    });
  }
  t.deepEqual(await store.list({ account: 'bad-limits' }), []);
});

test('rotateApiKey: the new key is accepted, the old one until its grace ends; a second rotation makes no key', async (t) => {
  const { key: oldKey, record } = await keyFor(['files:read'], { account: 'rotated' });
  const now = Math.floor(Date.now() / 1000);
  const rotation = await rotateApiKey(store, record.id, { prefix: 'kmg', nowSeconds: now, graceSeconds: 60 });
  if (rotation.outcome !== 'rotated') return t.fail(rotation.outcome);
  t.is(rotation.replacement.hash, hashApiKey(rotation.key));
  t.is(rotation.old.expiresAt, now + 60);
  for (const key of [rotation.key, oldKey]) t.is((await call('GET', '/v1/files', { 'x-api-key': key })).status, 200);
  t.like(await rotateApiKey(store, record.id, { prefix: 'kmg', nowSeconds: now, graceSeconds: 60 }), { outcome: 'replaced' });
  t.is((await store.list({ account: 'rotated' })).length, 2);
});

test('rotateApiKey refuses a grace that is not a whole number of seconds, before anything is rotated', async (t) => {
  const { record } = await keyFor(['files:read']);
  for (const graceSeconds of [-1, 1.5, Number.NaN]) {
    await t.throwsAsync(rotateApiKey(store, record.id, { prefix: 'kmg', nowSeconds: 0, graceSeconds }), { instanceOf: TypeError, message: /^koa-model-gateway: / });
  }
  t.is((await store.get(record.id))?.replacedBy, undefined);
});

test('a revoked key is 401', async (t) => {
  const { key, record } = await keyFor();
  t.is((await call('GET', '/v1/files', { 'x-api-key': key })).status, 200);
  await store.revoke(record.id);
  const res = await call('GET', '/v1/files', { 'x-api-key': key });
  t.is(res.status, 401);
  t.deepEqual(await res.json(), INVALID_KEY_A);
});

test('an expired key is 401, a key expiring later passes', async (t) => {
  const now = Math.floor(Date.now() / 1000);
  const expired = await keyFor([...SCOPES], { expiresAt: now - 1 });
  const live = await keyFor([...SCOPES], { expiresAt: now + 3600 });
  t.is((await call('GET', '/v1/files', { 'x-api-key': expired.key })).status, 401);
  t.is((await call('GET', '/v1/files', { 'x-api-key': live.key })).status, 200);
});

test('a key with no scopes is forbidden everywhere but still authenticated', async (t) => {
  const { key } = await keyFor([]);
  for (const { method, path } of OPERATIONS) {
    const res = await call(method, path, { 'x-api-key': key });
    t.is(res.status, 403, `${method} ${path}`);
    t.deepEqual(await res.json(), expectedBody(path, 403, requestIdOf(res, path)), `${method} ${path}`);
  }
});
