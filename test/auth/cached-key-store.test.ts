import test from 'ava';
import Koa from 'koa';
import { apiKey } from '../../lib/auth/api-key.js';
import { cachedKeyStore } from '../../lib/auth/cached-key-store.js';
import type { KeyStore } from '../../lib/auth/key-store.js';
import { createApiKey, generateApiKey, hashApiKey } from '../../lib/auth/keys.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
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
    revoke: (id) => inner.revoke(id),
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
    revoke: (id) => inner.revoke(id),
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
