import test from 'ava';
import Koa from 'koa';
import { apiKey, type ApiKeyOptions } from '../../lib/auth/api-key.js';
import { cachedKeyStore } from '../../lib/auth/cached-key-store.js';
import { extractApiKey } from '../../lib/auth/extract-api-key.js';
import { announceKeyChanges } from '../../lib/auth/key-changes.js';
import type { KeyStore } from '../../lib/auth/key-store.js';
import { keyUseRecorder } from '../../lib/auth/key-use-recorder.js';
import { createApiKey, generateApiKey, hashApiKey, rotateApiKey } from '../../lib/auth/keys.js';
import { modelAccess, visibleModels } from '../../lib/auth/model-access.js';
import { requireScope } from '../../lib/auth/require-scope.js';
import { SCOPES, type Scope } from '../../lib/auth/scopes.js';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import type { ModelLimits } from '../../lib/quota/model-limits.js';
import { MemoryKeyChanges } from '../../lib/stores/memory/key-changes.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { authApp, OPERATIONS } from '../helpers/auth-app.js';
import { listen, type Listening } from '../helpers/http.js';

// API keys: how they are made and checked (apiKey(), extractApiKey, model access), the cache in
// front of their store, and the recorder of their last use.

// apiKey().

// One gateway for the tests of apiKey() that need no app of their own.
const { app: authGateway, store: authStore, keyFor } = authApp();
let authServer: Listening;
test.before(async () => {
  authServer = await listen(authGateway);
});
test.after.always(() => authServer.close());

const call = (method: string, path: string, headers: Record<string, string> = {}) => fetch(authServer.url + path, { method, headers });

const INVALID_KEY_A = { error: { message: 'Invalid API key', type: 'authentication_error', param: null, code: 'invalid_api_key' } };
const FORBIDDEN_A = { error: { message: 'Forbidden', type: 'permission_error', param: null, code: 'forbidden' } };

function expectedBody(path: string, status: 401 | 403, requestId: string) {
  if (path !== '/v1/messages') return status === 401 ? INVALID_KEY_A : FORBIDDEN_A;
  const error = status === 401 ? { type: 'authentication_error', message: 'Invalid API key' } : { type: 'permission_error', message: 'Forbidden' };
  return { type: 'error', error, request_id: requestId };
}

const requestIdOf = (res: Response, path: string) => res.headers.get(path === '/v1/messages' ? 'request-id' : 'x-request-id') ?? '';

test('generated keys are <prefix>_sk_ and 256 random bits, stored only as their SHA-256', async (t) => {
  const { key, hash } = generateApiKey('kmg');
  t.regex(key, /^kmg_sk_[A-Za-z0-9_-]{43}$/);
  t.is(Buffer.from(key.slice('kmg_sk_'.length), 'base64url').length, 32);
  t.is(hash, hashApiKey(key));
  t.regex(hash, /^[0-9a-f]{64}$/);
  t.not(generateApiKey('kmg').key, key);
  const { key: created, record } = await keyFor();
  t.false(JSON.stringify(await authStore.list()).includes(created));
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
  t.throws(() => apiKey(undefined as unknown as ApiKeyOptions), { instanceOf: TypeError, message: 'koa-model-gateway: apiKey() needs a KeyStore as `store`' });
  t.throws(() => requireScope('files:wirte' as Scope), { instanceOf: TypeError, message: /^koa-model-gateway: requireScope\(\): unknown scope "files:wirte"/ });
});

test('createApiKey() refuses a scope it does not know: a misspelt one would leave the key without it', async (t) => {
  const store = new MemoryKeyStore();
  await t.throwsAsync(createApiKey(store, { prefix: 'kmg', account: 'acme', scopes: ['files:reed' as Scope] }), {
    instanceOf: TypeError,
    message: 'koa-model-gateway: createApiKey(): unknown scope "files:reed"',
  });
  t.deepEqual(await store.list(), []);
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
  t.deepEqual(await authStore.list({ account: 'bad-limits' }), []);
});

test('rotateApiKey: the new key is accepted, the old one until its grace ends; a second rotation makes no key', async (t) => {
  const { key: oldKey, record } = await keyFor(['files:read'], { account: 'rotated' });
  const now = Math.floor(Date.now() / 1000);
  const rotation = await rotateApiKey(authStore, record.id, { prefix: 'kmg', nowSeconds: now, graceSeconds: 60 });
  if (rotation.outcome !== 'rotated') return t.fail(rotation.outcome);
  t.is(rotation.replacement.hash, hashApiKey(rotation.key));
  t.is(rotation.old.expiresAt, now + 60);
  for (const key of [rotation.key, oldKey]) t.is((await call('GET', '/v1/files', { 'x-api-key': key })).status, 200);
  t.like(await rotateApiKey(authStore, record.id, { prefix: 'kmg', nowSeconds: now, graceSeconds: 60 }), { outcome: 'replaced' });
  t.is((await authStore.list({ account: 'rotated' })).length, 2);
});

test('rotateApiKey refuses a grace that is not a whole number of seconds, before anything is rotated', async (t) => {
  const { record } = await keyFor(['files:read']);
  for (const graceSeconds of [-1, 1.5, Number.NaN]) {
    await t.throwsAsync(rotateApiKey(authStore, record.id, { prefix: 'kmg', nowSeconds: 0, graceSeconds }), {
      instanceOf: TypeError,
      message: /^koa-model-gateway: /,
    });
  }
  t.is((await authStore.get(record.id))?.replacedBy, undefined);
});

test('a revoked key is 401', async (t) => {
  const { key, record } = await keyFor();
  t.is((await call('GET', '/v1/files', { 'x-api-key': key })).status, 200);
  await authStore.revoke(record.id);
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

// extractApiKey.

const KEY = 'kmg_sk_abc';

const extractCases: Array<[string, Record<string, string>, string | undefined]> = [
  ['x-api-key alone', { 'x-api-key': KEY }, KEY],
  ['Bearer alone', { authorization: `Bearer ${KEY}` }, KEY],
  ['scheme is case-insensitive', { authorization: `bearer ${KEY}` }, KEY],
  ['scheme in capitals', { authorization: `BEARER ${KEY}` }, KEY],
  ['x-api-key wins over a valid Bearer', { 'x-api-key': KEY, authorization: 'Bearer other' }, KEY],
  ['x-api-key wins over a malformed Authorization', { 'x-api-key': KEY, authorization: 'Basic dXNlcg==' }, KEY],
  ['x-api-key is trimmed', { 'x-api-key': `  ${KEY}\t` }, KEY],
  ['empty x-api-key falls back to Bearer', { 'x-api-key': '', authorization: `Bearer ${KEY}` }, KEY],
  ['blank x-api-key falls back to Bearer', { 'x-api-key': '   ', authorization: `Bearer ${KEY}` }, KEY],
  ['no header at all', {}, undefined],
  ['blank x-api-key alone', { 'x-api-key': ' ' }, undefined],
  ['Basic scheme', { authorization: 'Basic dXNlcjpwYXNz' }, undefined],
  ['Bearer without a token', { authorization: 'Bearer' }, undefined],
  ['Bearer and a space only', { authorization: 'Bearer ' }, undefined],
  ['two spaces', { authorization: `Bearer  ${KEY}` }, undefined],
  ['extra parts', { authorization: `Bearer ${KEY} extra` }, undefined],
  ['token without scheme', { authorization: KEY }, undefined],
  ['another scheme named like Bearer', { authorization: `Bearerx ${KEY}` }, undefined],
];

for (const [title, headers, expected] of extractCases) {
  test(`extractApiKey: ${title}`, (t) => {
    t.is(extractApiKey(headers), expected);
  });
}

// Model access.

const catalog = [{ id: 'gpt-4.1' }, { id: 'gpt-4.1-mini' }, { id: 'claude-sonnet' }];
const ids = new Set(catalog.map((model) => model.id));

const accessCases: Array<[string, string[] | null, string, ReturnType<typeof modelAccess>]> = [
  ['no list: a catalog model', null, 'gpt-4.1', 'allowed'],
  ['no list: a model outside the catalog', null, 'gpt-5', 'unknown'],
  ['listed and in the catalog', ['gpt-4.1'], 'gpt-4.1', 'allowed'],
  ['not listed but in the catalog', ['gpt-4.1'], 'claude-sonnet', 'not_allowed'],
  ['not listed and not in the catalog', ['gpt-4.1'], 'gpt-5', 'not_allowed'],
  ['listed but not in the catalog', ['gpt-5'], 'gpt-5', 'unknown'],
  ['ids match exactly, not by prefix', ['gpt-4.1'], 'gpt-4.1-mini', 'not_allowed'],
  ['a listed prefix does not widen', ['gpt'], 'gpt-4.1', 'not_allowed'],
  ['no wildcard', ['*'], 'gpt-4.1', 'not_allowed'],
  ['case matters', ['GPT-4.1'], 'gpt-4.1', 'not_allowed'],
  ['an empty list allows nothing', [], 'gpt-4.1', 'not_allowed'],
];

for (const [title, models, model, expected] of accessCases) {
  test(`modelAccess: ${title}`, (t) => {
    t.is(modelAccess({ models }, ids, model), expected);
  });
}

test('visibleModels: no list sees the whole catalog in order', (t) => {
  t.deepEqual(visibleModels({ models: null }, catalog), catalog);
});

test('visibleModels: a list sees only its catalog models, in catalog order', (t) => {
  t.deepEqual(visibleModels({ models: ['claude-sonnet', 'gpt-4.1', 'gpt-5'] }, catalog), [{ id: 'gpt-4.1' }, { id: 'claude-sonnet' }]);
  t.deepEqual(visibleModels({ models: [] }, catalog), []);
});

// cachedKeyStore.

/** `inner` with another `findByHash`; every other method passes through. */
function withFindByHash(inner: KeyStore, findByHash: KeyStore['findByHash']): KeyStore {
  return {
    findByHash,
    create: (key) => inner.create(key),
    list: (filter) => inner.list(filter),
    get: (id) => inner.get(id),
    revoke: (id) => inner.revoke(id),
    update: (id, update) => inner.update(id, update),
    rotate: (id, rotation) => inner.rotate(id, rotation),
    touch: (ids, atSeconds) => inner.touch(ids, atSeconds),
  };
}

/** A memory store that counts the lookups reaching it, behind a cache on a clock the test moves. */
function countedCache(options: { ttlMs?: number; maxEntries?: number } = {}) {
  const inner = new MemoryKeyStore();
  let lookups = 0;
  const counted = withFindByHash(inner, (hash) => {
    lookups += 1;
    return inner.findByHash(hash);
  });
  const clock = { ms: 1_000_000 };
  const cached = cachedKeyStore(counted, { ...options, nowMs: () => clock.ms });
  const newKey = (store: KeyStore = cached, expiresAt: number | null = null) =>
    createApiKey(store, { prefix: 'kmg', account: 'acme', scopes: ['files:read'], models: null, expiresAt });
  return { inner, cached, clock, newKey, lookups: () => lookups };
}

test('a repeated lookup within the ttl does not reach the store, found or not found', async (t) => {
  const { cached, newKey, lookups } = countedCache();
  const { record } = await newKey();
  t.deepEqual(await cached.findByHash(record.hash), record);
  t.deepEqual(await cached.findByHash(record.hash), record);
  const unknown = hashApiKey('kmg_sk_unknown');
  t.is(await cached.findByHash(unknown), undefined);
  t.is(await cached.findByHash(unknown), undefined);
  t.is(lookups(), 2);
});

test('after the ttl the store is asked again, and sees a revocation made around the cache', async (t) => {
  const { inner, cached, clock, newKey, lookups } = countedCache({ ttlMs: 5000 });
  const { record } = await newKey();
  await cached.findByHash(record.hash);
  await inner.revoke(record.id); // as the CLI or another process would
  clock.ms += 4999;
  t.is((await cached.findByHash(record.hash))?.revokedAt, null);
  clock.ms += 1;
  t.is(typeof (await cached.findByHash(record.hash))?.revokedAt, 'number');
  t.is(lookups(), 2);
});

test('a "not found" expires too: a key created around the cache is found once the ttl has passed', async (t) => {
  const { inner, cached, clock } = countedCache({ ttlMs: 5000 });
  const { hash } = generateApiKey('kmg');
  t.is(await cached.findByHash(hash), undefined);
  await inner.create({ account: 'acme', hash, scopes: ['files:read'], models: null, expiresAt: null });
  t.is(await cached.findByHash(hash), undefined);
  clock.ms += 5000;
  t.is((await cached.findByHash(hash))?.hash, hash);
});

test('create and revoke through the cache take effect at once', async (t) => {
  const { cached, newKey } = countedCache({ ttlMs: 60_000 });
  const { hash } = generateApiKey('kmg');
  t.is(await cached.findByHash(hash), undefined);
  const created = await cached.create({ account: 'acme', hash, scopes: ['files:read'], models: null, expiresAt: null });
  t.deepEqual(await cached.findByHash(hash), created);

  const { record } = await newKey();
  t.is((await cached.findByHash(record.hash))?.revokedAt, null);
  t.is(await cached.revoke(record.id), 'revoked');
  t.is(typeof (await cached.findByHash(record.hash))?.revokedAt, 'number');
});

test('a lookup in flight while the key is revoked through the cache is not remembered', async (t) => {
  const inner = new MemoryKeyStore();
  const { record } = await createApiKey(inner, { prefix: 'kmg', account: 'acme', scopes: ['files:read'], models: null, expiresAt: null });
  let release = () => {};
  const slow = withFindByHash(inner, async (hash) => {
    const found = await inner.findByHash(hash);
    await new Promise<void>((resolve) => (release = resolve));
    return found;
  });
  const cached = cachedKeyStore(slow, { ttlMs: 60_000 });
  const inFlight = cached.findByHash(record.hash);
  await new Promise((resolve) => setImmediate(resolve));
  await cached.revoke(record.id);
  release();
  t.is((await inFlight)?.revokedAt, null);
  const next = cached.findByHash(record.hash);
  await new Promise((resolve) => setImmediate(resolve));
  release();
  t.is(typeof (await next)?.revokedAt, 'number');
});

test('an update through the cache takes effect at once', async (t) => {
  const { cached, newKey } = countedCache({ ttlMs: 60_000 });
  const { record } = await newKey();
  await cached.findByHash(record.hash);
  await cached.update(record.id, { scopes: ['models:read'], limits: { requestsPerMinute: 5 } });
  t.like(await cached.findByHash(record.hash), { scopes: ['models:read'], limits: { requestsPerMinute: 5 } });
});

test('a revocation that is made but whose announcement fails still takes effect in this process at once', async (t) => {
  const { inner, newKey } = countedCache();
  const failing = { publish: () => Promise.reject(new Error('Redis is away')), subscribe: () => () => {} };
  const cached = cachedKeyStore(announceKeyChanges(inner, failing), { ttlMs: 60_000 });
  const { record } = await newKey(inner);
  await cached.findByHash(record.hash);
  await t.throwsAsync(cached.revoke(record.id), { message: 'Redis is away' });
  t.is(typeof (await cached.findByHash(record.hash))?.revokedAt, 'number');
});

test('with onError, a change made but not announced answers all the same, and onError hears of it', async (t) => {
  const { inner, newKey } = countedCache();
  const away = new Error('Redis is away');
  const failures: Array<[unknown, string]> = [];
  const keys = announceKeyChanges(
    inner,
    { publish: () => Promise.reject(away), subscribe: () => () => {} },
    { onError: (err, id) => failures.push([err, id]) },
  );
  const [{ record: revoked }, { record: updated }, { record: rotated }] = [await newKey(inner), await newKey(inner), await newKey(inner)];
  t.is(await keys.revoke(revoked.id), 'revoked');
  t.like(await keys.update(updated.id, { scopes: ['models:read'] }), { scopes: ['models:read'] });
  const rotation = await keys.rotate(rotated.id, { hash: 'f'.repeat(64), nowSeconds: Date.now() / 1000, graceEndsAt: Math.floor(Date.now() / 1000) });
  t.is(rotation.outcome, 'rotated');
  t.deepEqual(failures, [
    [away, revoked.id],
    [away, updated.id],
    [away, rotated.id],
  ]);
  // Nothing to announce, nothing reported.
  t.is(await keys.revoke('key_doesnotexist'), 'not_found');
  t.is(await keys.revoke(revoked.id), 'already_revoked');
  t.is((await keys.rotate(rotated.id, { hash: 'e'.repeat(64), nowSeconds: Date.now() / 1000, graceEndsAt: 0 })).outcome, 'replaced');
  t.is(failures.length, 3);
});

test('with changes, a key revoked or changed in another process is forgotten at once, long before the ttl', async (t) => {
  const changes = new MemoryKeyChanges();
  const { inner, clock, newKey } = countedCache();
  const cached = cachedKeyStore(inner, { ttlMs: 60_000, changes, nowMs: () => clock.ms });
  // Another process: its own writes to the shared store, announced on the shared feed.
  const elsewhere = announceKeyChanges(inner, changes);
  const [{ record: revoked }, { record: kept }] = [await newKey(inner), await newKey(inner)];
  await cached.findByHash(revoked.hash);
  await cached.findByHash(kept.hash);
  await elsewhere.revoke(revoked.id);
  t.is(typeof (await cached.findByHash(revoked.hash))?.revokedAt, 'number');
  await elsewhere.update(kept.id, { models: ['echo-1'] });
  t.deepEqual((await cached.findByHash(kept.hash))?.models, ['echo-1']);
});

test('with changes, an announcement without an id (changes may have been missed) forgets every key', async (t) => {
  let announce: (id?: string) => void = () => {};
  const changes = { publish: async () => {}, subscribe: (listener: (id?: string) => void) => ((announce = listener), () => {}) };
  const { inner, clock, newKey } = countedCache();
  const { record } = await newKey(inner);
  const cached = cachedKeyStore(inner, { ttlMs: 60_000, changes, nowMs: () => clock.ms });
  await cached.findByHash(record.hash);
  await inner.revoke(record.id);
  t.is((await cached.findByHash(record.hash))?.revokedAt, null);
  announce();
  t.is(typeof (await cached.findByHash(record.hash))?.revokedAt, 'number');
});

test('at most maxEntries hashes are remembered, the oldest forgotten first', async (t) => {
  const { cached, lookups } = countedCache({ maxEntries: 2 });
  const [a, b, c] = ['a', 'b', 'c'].map((name) => hashApiKey(`kmg_sk_${name}`)) as [string, string, string];
  for (const hash of [a, b, c]) await cached.findByHash(hash);
  t.is(lookups(), 3);
  await cached.findByHash(c);
  await cached.findByHash(b);
  t.is(lookups(), 3);
  await cached.findByHash(a);
  t.is(lookups(), 4);
});

test('records handed out are copies: changing one does not change the cached answer', async (t) => {
  const { cached, newKey } = countedCache();
  const { record } = await newKey();
  (await cached.findByHash(record.hash))?.scopes.push('files:delete');
  t.deepEqual((await cached.findByHash(record.hash))?.scopes, ['files:read']);
});

test('behind apiKey(), a cached key still stops working the second it expires', async (t) => {
  const store = cachedKeyStore(new MemoryKeyStore(), { ttlMs: 60_000 });
  const clock = { seconds: 1_800_000_000 };
  const gateway = new Koa();
  gateway.use(openAIErrors());
  gateway.use(apiKey({ store, nowMs: () => clock.seconds * 1000 }));
  gateway.use((ctx) => {
    ctx.body = 'ok';
  });
  const server = await listen(gateway);
  t.teardown(() => server.close());
  const { key } = await createApiKey(store, { prefix: 'kmg', account: 'acme', scopes: ['files:read'], models: null, expiresAt: clock.seconds + 10 });
  const call = () => fetch(server.url, { headers: { 'x-api-key': key } }).then((res) => res.status);
  t.is(await call(), 200);
  clock.seconds += 10;
  t.is(await call(), 401);
});

test('bad options are refused when the cache is made', (t) => {
  const store = new MemoryKeyStore();
  t.throws(() => cachedKeyStore(undefined as unknown as KeyStore), { instanceOf: TypeError });
  t.throws(() => cachedKeyStore(store, { ttlMs: -1 }), { instanceOf: TypeError });
  t.throws(() => cachedKeyStore(store, { maxEntries: 0 }), { instanceOf: TypeError });
});

// keyUseRecorder.

/** A memory store whose `touch` calls are counted (and can be made to fail or stall), on a clock and timers the test moves. */
function countedRecorder(touch?: (ids: readonly string[], atSeconds: number) => Promise<void>) {
  const store = new MemoryKeyStore();
  const writes: Array<{ ids: string[]; atSeconds: number }> = [];
  const counted: Pick<KeyStore, 'touch'> = {
    touch: (ids, atSeconds) => {
      writes.push({ ids: [...ids], atSeconds });
      return touch ? touch(ids, atSeconds) : store.touch(ids, atSeconds);
    },
  };
  const clock = { ms: 1_900_000_000_000 };
  const pending: Array<() => void> = [];
  const timers = { setTimeout: (callback: () => void) => pending.push(callback), clearTimeout: () => undefined };
  const errors: Error[] = [];
  const uses = keyUseRecorder({ store: counted, nowMs: () => clock.ms, timers, onError: (err) => errors.push(err) });
  const key = (account = 'acme') => createApiKey(store, { prefix: 'kmg', account, scopes: ['models:read'] });
  return { store, writes, clock, pending, errors, uses, key };
}

test('N uses of one key within a minute are one write; a use a minute later is another', async (t) => {
  const { store, writes, clock, uses, key } = countedRecorder();
  const { record } = await key();
  for (let i = 0; i < 50; i += 1) {
    uses.record(record.id);
    clock.ms += 1000; // 50 uses over 50 seconds
  }
  await uses.flush();
  t.deepEqual(writes, [{ ids: [record.id], atSeconds: 1_900_000_000 }]);
  t.is((await store.get(record.id))?.lastUsedAt, 1_900_000_000);
  for (let i = 0; i < 9; i += 1) uses.record(record.id);
  await uses.flush();
  t.is(writes.length, 1);
  clock.ms = 1_900_000_060_000;
  uses.record(record.id);
  await uses.flush();
  t.deepEqual(writes[1], { ids: [record.id], atSeconds: 1_900_000_060 });
  t.is((await store.get(record.id))?.lastUsedAt, 1_900_000_060);
});

test('the uses of several keys gathered before the timer fires are written in one call', async (t) => {
  const { store, writes, pending, uses, key } = countedRecorder();
  const [one, two] = [(await key()).record, (await key('globex')).record];
  uses.record(one.id);
  uses.record(two.id);
  uses.record(one.id);
  t.is(writes.length, 0);
  t.is(pending.length, 1);
  pending.shift()?.();
  await uses.flush();
  t.deepEqual(writes, [{ ids: [one.id, two.id], atSeconds: 1_900_000_000 }]);
  t.is((await store.get(two.id))?.lastUsedAt, 1_900_000_000);
});

test('a failed write goes to onError and is not thrown; a write that never ends does not hold up the request', async (t) => {
  const failing = countedRecorder(async () => {
    throw new Error('database away');
  });
  const { record } = await failing.key();
  failing.uses.record(record.id);
  await failing.uses.flush();
  t.is(failing.errors.length, 1);
  t.regex(failing.errors[0]?.message ?? '', /last use of 1 keys was not written/);

  const stalled = countedRecorder(() => new Promise<void>(() => undefined));
  const { key } = await stalled.key();
  const app = new Koa();
  app.use(gatewayErrors());
  app.use(apiKey({ store: stalled.store, uses: stalled.uses }));
  app.use((ctx) => {
    ctx.body = { ok: true };
  });
  const server = await listen(app);
  t.teardown(() => server.close());
  for (let i = 0; i < 3; i += 1) {
    const response = await fetch(`${server.url}/`, { headers: { authorization: `Bearer ${key}` } });
    t.is(response.status, 200);
    // Starts the write, which never ends, without waiting for it.
    void stalled.uses.flush();
  }
  t.is(stalled.writes.length, 1);
  t.is(stalled.errors.length, 0);
});

test('apiKey() notes each verified key and nothing else: unknown, revoked or missing keys are not noted', async (t) => {
  const { store, writes, uses, key } = countedRecorder();
  const [live, revoked] = [await key(), await key()];
  await store.revoke(revoked.record.id);
  const app = new Koa();
  app.use(gatewayErrors());
  app.use(apiKey({ store, uses }));
  app.use((ctx) => {
    ctx.body = { ok: true };
  });
  const server = await listen(app);
  t.teardown(() => server.close());
  const statuses = [];
  for (const header of [live.key, revoked.key, 'kmg_sk_unknown', ...Array.from({ length: 9 }, () => live.key)]) {
    statuses.push((await fetch(`${server.url}/`, { headers: { authorization: `Bearer ${header}` } })).status);
  }
  statuses.push((await fetch(`${server.url}/`)).status);
  t.deepEqual(statuses, [200, 401, 401, ...Array.from({ length: 9 }, () => 200), 401]);
  await uses.flush();
  // Ten requests with the key within the minute: one write.
  t.deepEqual(writes, [{ ids: [live.record.id], atSeconds: 1_900_000_000 }]);
  t.is((await store.get(live.record.id))?.lastUsedAt, 1_900_000_000);
  t.false('lastUsedAt' in ((await store.get(revoked.record.id)) as object));
});

test('keyUseRecorder() refuses what is not a KeyStore or a bad interval', (t) => {
  t.throws(() => keyUseRecorder({ store: {} as KeyStore }), { instanceOf: TypeError });
  t.throws(() => keyUseRecorder({ store: new MemoryKeyStore(), intervalMs: -1 }), { instanceOf: TypeError });
});
