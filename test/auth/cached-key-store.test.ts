import test from 'ava';
import Koa from 'koa';
import { apiKey } from '../../lib/auth/api-key.js';
import { cachedKeyStore } from '../../lib/auth/cached-key-store.js';
import { announceKeyChanges } from '../../lib/auth/key-changes.js';
import type { KeyStore } from '../../lib/auth/key-store.js';
import { createApiKey, generateApiKey, hashApiKey } from '../../lib/auth/keys.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { MemoryKeyChanges } from '../../lib/stores/memory/key-changes.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { listen } from '../helpers/http.js';

/** A memory store that counts the lookups reaching it, behind a cache on a clock the test moves. */
function setup(options: { ttlMs?: number; maxEntries?: number } = {}) {
  const inner = new MemoryKeyStore();
  let lookups = 0;
  const counted: KeyStore = {
    findByHash: (hash) => {
      lookups += 1;
      return inner.findByHash(hash);
    },
    create: (key) => inner.create(key),
    list: (filter) => inner.list(filter),
    get: (id) => inner.get(id),
    revoke: (id) => inner.revoke(id),
    update: (id, update) => inner.update(id, update),
    rotate: (id, rotation) => inner.rotate(id, rotation),
    touch: (ids, atSeconds) => inner.touch(ids, atSeconds),
  };
  const clock = { ms: 1_000_000 };
  const cached = cachedKeyStore(counted, { ...options, nowMs: () => clock.ms });
  const newKey = (store: KeyStore = cached, expiresAt: number | null = null) =>
    createApiKey(store, { prefix: 'kmg', account: 'acme', scopes: ['files:read'], models: null, expiresAt });
  return { inner, cached, clock, newKey, lookups: () => lookups };
}

test('a repeated lookup within the ttl does not reach the store, found or not found', async (t) => {
  const { cached, newKey, lookups } = setup();
  const { record } = await newKey();
  t.deepEqual(await cached.findByHash(record.hash), record);
  t.deepEqual(await cached.findByHash(record.hash), record);
  const unknown = hashApiKey('kmg_sk_unknown');
  t.is(await cached.findByHash(unknown), undefined);
  t.is(await cached.findByHash(unknown), undefined);
  t.is(lookups(), 2);
});

test('after the ttl the store is asked again, and sees a revocation made around the cache', async (t) => {
  const { inner, cached, clock, newKey, lookups } = setup({ ttlMs: 5000 });
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
  const { inner, cached, clock } = setup({ ttlMs: 5000 });
  const { hash } = generateApiKey('kmg');
  t.is(await cached.findByHash(hash), undefined);
  await inner.create({ account: 'acme', hash, scopes: ['files:read'], models: null, expiresAt: null });
  t.is(await cached.findByHash(hash), undefined);
  clock.ms += 5000;
  t.is((await cached.findByHash(hash))?.hash, hash);
});

test('create and revoke through the cache take effect at once', async (t) => {
  const { cached, newKey } = setup({ ttlMs: 60_000 });
  const { hash } = generateApiKey('kmg');
  t.is(await cached.findByHash(hash), undefined);
  const created = await cached.create({ account: 'acme', hash, scopes: ['files:read'], models: null, expiresAt: null });
  t.deepEqual(await cached.findByHash(hash), created);

  const { record } = await newKey();
  t.is((await cached.findByHash(record.hash))?.revokedAt, null);
  t.true(await cached.revoke(record.id));
  t.is(typeof (await cached.findByHash(record.hash))?.revokedAt, 'number');
});

test('a lookup in flight while the key is revoked through the cache is not remembered', async (t) => {
  const inner = new MemoryKeyStore();
  const { record } = await createApiKey(inner, { prefix: 'kmg', account: 'acme', scopes: ['files:read'], models: null, expiresAt: null });
  let release = () => {};
  const slow: KeyStore = {
    findByHash: async (hash) => {
      const found = await inner.findByHash(hash);
      await new Promise<void>((resolve) => (release = resolve));
      return found;
    },
    create: (key) => inner.create(key),
    list: (filter) => inner.list(filter),
    get: (id) => inner.get(id),
    revoke: (id) => inner.revoke(id),
    update: (id, update) => inner.update(id, update),
    rotate: (id, rotation) => inner.rotate(id, rotation),
    touch: (ids, atSeconds) => inner.touch(ids, atSeconds),
  };
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
  const { cached, newKey } = setup({ ttlMs: 60_000 });
  const { record } = await newKey();
  await cached.findByHash(record.hash);
  await cached.update(record.id, { scopes: ['models:read'], limits: { requestsPerMinute: 5 } });
  t.like(await cached.findByHash(record.hash), { scopes: ['models:read'], limits: { requestsPerMinute: 5 } });
});

test('a revocation that is made but whose announcement fails still takes effect in this process at once', async (t) => {
  const { inner, newKey } = setup();
  const failing = { publish: () => Promise.reject(new Error('Redis is away')), subscribe: () => () => {} };
  const cached = cachedKeyStore(announceKeyChanges(inner, failing), { ttlMs: 60_000 });
  const { record } = await newKey(inner);
  await cached.findByHash(record.hash);
  await t.throwsAsync(cached.revoke(record.id), { message: 'Redis is away' });
  t.is(typeof (await cached.findByHash(record.hash))?.revokedAt, 'number');
});

test('with onError, a change made but not announced answers all the same, and onError hears of it', async (t) => {
  const { inner, newKey } = setup();
  const away = new Error('Redis is away');
  const failures: Array<[unknown, string]> = [];
  const keys = announceKeyChanges(inner, { publish: () => Promise.reject(away), subscribe: () => () => {} }, { onError: (err, id) => failures.push([err, id]) });
  const [{ record: revoked }, { record: updated }, { record: rotated }] = [await newKey(inner), await newKey(inner), await newKey(inner)];
  t.true(await keys.revoke(revoked.id));
  t.like(await keys.update(updated.id, { scopes: ['models:read'] }), { scopes: ['models:read'] });
  const rotation = await keys.rotate(rotated.id, { hash: 'f'.repeat(64), nowSeconds: Date.now() / 1000, graceEndsAt: Math.floor(Date.now() / 1000) });
  t.is(rotation.outcome, 'rotated');
  t.deepEqual(failures, [
    [away, revoked.id],
    [away, updated.id],
    [away, rotated.id],
  ]);
  // Nothing to announce, nothing reported.
  t.false(await keys.revoke('key_doesnotexist'));
  t.is((await keys.rotate(rotated.id, { hash: 'e'.repeat(64), nowSeconds: Date.now() / 1000, graceEndsAt: 0 })).outcome, 'replaced');
  t.is(failures.length, 3);
});

test('with changes, a key revoked or changed in another process is forgotten at once, long before the ttl', async (t) => {
  const changes = new MemoryKeyChanges();
  const { inner, clock, newKey } = setup();
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
  const { inner, clock, newKey } = setup();
  const { record } = await newKey(inner);
  const cached = cachedKeyStore(inner, { ttlMs: 60_000, changes, nowMs: () => clock.ms });
  await cached.findByHash(record.hash);
  await inner.revoke(record.id);
  t.is((await cached.findByHash(record.hash))?.revokedAt, null);
  announce();
  t.is(typeof (await cached.findByHash(record.hash))?.revokedAt, 'number');
});

test('at most maxEntries hashes are remembered, the oldest forgotten first', async (t) => {
  const { cached, lookups } = setup({ maxEntries: 2 });
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
  const { cached, newKey } = setup();
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
