import type { TestFn } from 'ava';
import type { KeyStore, NewApiKey } from '../../lib/auth/key-store.js';
import { hashApiKey } from '../../lib/auth/keys.js';

const newKey = (account: string, overrides: Partial<NewApiKey> = {}): NewApiKey => ({
  account,
  hash: hashApiKey(`kmg_sk_${Math.random()}`),
  scopes: ['files:read', 'files:write'],
  models: null,
  expiresAt: null,
  ...overrides,
});

/** The behaviour every KeyStore must have; run once per implementation. */
export function keyStoreContract(test: TestFn, name: string, makeStore: () => Promise<KeyStore>): void {
  test(`${name}: a created key is found by its hash, with everything it was created with`, async (t) => {
    const store = await makeStore();
    const input = newKey('acme', { scopes: ['models:read'], models: ['echo-1', 'echo-2'], expiresAt: 2_000_000_000 });
    const created = await store.create(input);
    t.regex(created.id, /^key_[A-Za-z0-9]{24}$/);
    t.is(created.revokedAt, null);
    t.true(Math.abs(created.createdAt - Date.now() / 1000) < 5);
    t.deepEqual(await store.findByHash(input.hash), created);
    t.like(created, input);
  });

  test(`${name}: a key's own limits are kept, each one alone or together; a key without limits has none`, async (t) => {
    const store = await makeStore();
    const cases = [
      { requestsPerMinute: 10, tokensPerMinute: 40_000, tokensPerDay: 5_000_000_000 },
      { tokensPerDay: 1 },
      { requestsPerMinute: 3 },
    ];
    for (const limits of cases) {
      const created = await store.create(newKey('acme', { limits }));
      t.deepEqual(created.limits, limits);
      t.deepEqual((await store.findByHash(created.hash))?.limits, limits);
    }
    for (const input of [newKey('acme'), newKey('acme', { limits: {} })]) {
      const created = await store.create(input);
      t.false('limits' in created);
      t.deepEqual(await store.findByHash(created.hash), created);
    }
    const listed = await store.list({ account: 'acme' });
    t.deepEqual(
      listed.map((key) => key.limits),
      [...cases, undefined, undefined],
    );
  });

  test(`${name}: an unknown hash finds nothing`, async (t) => {
    const store = await makeStore();
    await store.create(newKey('acme'));
    t.is(await store.findByHash(hashApiKey('kmg_sk_unknown')), undefined);
  });

  test(`${name}: no allowlist (null) and an empty allowlist stay distinct`, async (t) => {
    const store = await makeStore();
    const open = await store.create(newKey('acme', { models: null }));
    const closed = await store.create(newKey('acme', { models: [] }));
    t.is((await store.findByHash(open.hash))?.models, null);
    t.deepEqual((await store.findByHash(closed.hash))?.models, []);
  });

  test(`${name}: list is in creation order and filters by account`, async (t) => {
    const store = await makeStore();
    const a1 = await store.create(newKey('list-a'));
    const b1 = await store.create(newKey('list-b'));
    const a2 = await store.create(newKey('list-a'));
    t.deepEqual((await store.list({ account: 'list-a' })).map((key) => key.id), [a1.id, a2.id]);
    t.deepEqual((await store.list({ account: 'list-b' })).map((key) => key.id), [b1.id]);
    const all = (await store.list()).map((key) => key.id);
    for (const id of [a1.id, a2.id, b1.id]) t.true(all.includes(id));
  });

  test(`${name}: revoke marks the key once and reports unknown ids`, async (t) => {
    const store = await makeStore();
    const created = await store.create(newKey('acme'));
    t.true(await store.revoke(created.id));
    const revokedAt = (await store.findByHash(created.hash))?.revokedAt;
    t.is(typeof revokedAt, 'number');
    t.true(await store.revoke(created.id));
    t.is((await store.findByHash(created.hash))?.revokedAt, revokedAt);
    t.false(await store.revoke('key_doesnotexist'));
  });

  test(`${name}: two keys never share a hash`, async (t) => {
    const store = await makeStore();
    const input = newKey('acme');
    await store.create(input);
    await t.throwsAsync(store.create({ ...input, account: 'other' }), { any: true });
  });

  test(`${name}: records handed out are copies`, async (t) => {
    const store = await makeStore();
    const created = await store.create(newKey('acme', { limits: { requestsPerMinute: 1 } }));
    const found = await store.findByHash(created.hash);
    found?.scopes.push('files:delete');
    if (found?.limits) found.limits.requestsPerMinute = 99;
    t.like(await store.findByHash(created.hash), { scopes: ['files:read', 'files:write'], limits: { requestsPerMinute: 1 } });
  });
}
