import type { StoreContractTest } from './store-contract-test.js';
import type { KeyStore, NewApiKey } from '../auth/key-store.js';
import { hashApiKey } from '../auth/keys.js';

const newKey = (account: string, overrides: Partial<NewApiKey> = {}): NewApiKey => ({
  account,
  hash: hashApiKey(`kmg_sk_${Math.random()}`),
  scopes: ['files:read', 'files:write'],
  models: null,
  expiresAt: null,
  ...overrides,
});

/** The behaviour every KeyStore must have; run once per implementation. */
export function keyStoreContract(test: StoreContractTest, name: string, makeStore: () => Promise<KeyStore>): void {
  test(`${name}: a created key is found by its hash, with everything it was created with`, async (t) => {
    const store = await makeStore();
    const input = newKey('acme', { scopes: ['models:read'], models: ['echo-1', 'echo-2'], expiresAt: 2_000_000_000 });
    // Made between the call and its answer, in Unix seconds: however long a busy machine takes.
    const before = Math.floor(Date.now() / 1000);
    const created = await store.create(input);
    const after = Date.now() / 1000;
    t.regex(created.id, /^key_[A-Za-z0-9]{24}$/);
    t.is(created.revokedAt, null);
    t.true(created.createdAt >= before && created.createdAt <= after, `created at ${created.createdAt}, called at ${before}, answered at ${after}`);
    t.deepEqual(await store.findByHash(input.hash), created);
    t.like(created, input);
  });

  test(`${name}: an account name not in its canonical form (trimmed, NFC, printable, well-formed) is refused, and no key is made`, async (t) => {
    const store = await makeStore();
    for (const account of ['', ' acme', 'acme\n', 'ac\u202Eme', 'a\ud800b', 'a\uFFFDb', 'Cafe\u0301', 'a'.repeat(256)]) {
      await t.throwsAsync(store.create(newKey(account)), { instanceOf: TypeError, message: /account name/ }, JSON.stringify(account));
    }
    t.deepEqual(await store.list(), []);
    t.is((await store.create(newKey('Caf\u00e9 \u{1F600}'))).account, 'Caf\u00e9 \u{1F600}');
  });

  test(`${name}: a fractional expiry (a Date.now() / 1000 clock) is kept as its whole second, on create and update`, async (t) => {
    const store = await makeStore();
    const created = await store.create(newKey('acme', { expiresAt: 2_000_000_000.75 }));
    t.is(created.expiresAt, 2_000_000_000);
    t.is((await store.findByHash(created.hash))?.expiresAt, 2_000_000_000);
    t.is((await store.update(created.id, { expiresAt: 2_100_000_000.5 }))?.expiresAt, 2_100_000_000);
    t.is((await store.get(created.id))?.expiresAt, 2_100_000_000);
  });

  test(`${name}: a key's own limits are kept, each one alone or together; a key without limits has none`, async (t) => {
    const store = await makeStore();
    const cases = [{ requestsPerMinute: 10, tokensPerMinute: 40_000, tokensPerDay: 5_000_000_000 }, { tokensPerDay: 1 }, { requestsPerMinute: 3 }];
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

  test(`${name}: a key's soft budgets and alert thresholds are kept, changed, removed with its limits, and carried over by a rotation`, async (t) => {
    const store = await makeStore();
    const limits = { costPerDay: 2.5, costSoft: true, costAlertThresholds: [50, 90, 100] };
    const created = await store.create(newKey('acme', { limits }));
    t.deepEqual(created.limits, limits);
    t.deepEqual((await store.findByHash(created.hash))?.limits, limits);
    const hard = { costPerMonth: 9, costSoft: false, costAlertThresholds: [75] };
    t.deepEqual((await store.update(created.id, { limits: hard }))?.limits, hard);
    const now = Math.floor(Date.now() / 1000);
    const rotated = await store.rotate(created.id, { hash: 'rotated-hash-of-soft-key', hint: 'ab12', nowSeconds: now, graceEndsAt: now });
    t.deepEqual(rotated.outcome === 'rotated' ? rotated.replacement.limits : undefined, hard);
    const alone = await store.create(newKey('acme', { limits: { costSoft: true } }));
    t.deepEqual((await store.get(alone.id))?.limits, { costSoft: true });
    t.false('limits' in ((await store.update(alone.id, { limits: null })) ?? {}));
  });

  test(`${name}: a key's own response caching is kept, changed, removed by null, and carried over by a rotation`, async (t) => {
    const store = await makeStore();
    const created = await store.create(newKey('acme', { cache: { ttlSeconds: 600, perKey: true } }));
    t.deepEqual(created.cache, { ttlSeconds: 600, perKey: true });
    t.deepEqual((await store.findByHash(created.hash))?.cache, { ttlSeconds: 600, perKey: true });
    t.false('cache' in (await store.create(newKey('acme'))));
    t.deepEqual((await store.update(created.id, { cache: { ttlSeconds: 60 } }))?.cache, { ttlSeconds: 60 });
    const rotated = await store.rotate(created.id, {
      hash: hashApiKey(`kmg_sk_${Math.random()}`),
      nowSeconds: Math.floor(Date.now() / 1000),
      graceEndsAt: Math.floor(Date.now() / 1000) + 60,
    });
    if (rotated.outcome !== 'rotated') return t.fail(rotated.outcome);
    t.deepEqual(rotated.replacement.cache, { ttlSeconds: 60 });
    t.false('cache' in ((await store.update(rotated.replacement.id, { cache: null })) ?? {}));
  });

  test(`${name}: a key's name and hint are kept; an update renames it, null removes the name; a key without them has neither`, async (t) => {
    const store = await makeStore();
    const named = await store.create(newKey('acme', { name: 'Billing \u{1F4B8}', hint: '3tKs' }));
    t.like(named, { name: 'Billing \u{1F4B8}', hint: '3tKs' });
    t.deepEqual(await store.findByHash(named.hash), named);
    t.like(await store.update(named.id, { name: 'Invoices' }), { name: 'Invoices', hint: '3tKs' });
    t.like(await store.update(named.id, { scopes: ['models:read'] }), { name: 'Invoices' });
    const unnamed = await store.update(named.id, { name: null });
    t.false(unnamed !== undefined && 'name' in unnamed);
    t.is((await store.get(named.id))?.hint, '3tKs');
    const plain = await store.create(newKey('acme'));
    t.false('name' in plain || 'hint' in plain || 'lastUsedAt' in plain || 'replaces' in plain || 'replacedBy' in plain);
    t.deepEqual(await store.findByHash(plain.hash), plain);
  });

  test(`${name}: a hint that is not four characters of a secret is refused (TypeError), on create and rotate, and no key is made`, async (t) => {
    const store = await makeStore();
    const secret = `kmg_sk_${'a'.repeat(43)}`;
    for (const hint of ['', 'abc', 'abcde', secret, 'ab c']) {
      await t.throwsAsync(store.create(newKey('acme', { hint })), { instanceOf: TypeError, message: /hint/ }, JSON.stringify(hint));
    }
    t.deepEqual(await store.list(), []);
    const key = await store.create(newKey('acme'));
    await t.throwsAsync(
      store.rotate(key.id, { hash: hashApiKey(secret), hint: secret.slice(-8), nowSeconds: Date.now() / 1000, graceEndsAt: Date.now() / 1000 + 60 }),
      {
        instanceOf: TypeError,
      },
    );
    t.is((await store.list()).length, 1);
    t.like(await store.get(key.id), { expiresAt: null });
  });

  test(`${name}: touch sets the keys' last use, in whole seconds, never back in time; unknown ids are skipped`, async (t) => {
    const store = await makeStore();
    const [one, two, untouched] = [await store.create(newKey('acme')), await store.create(newKey('acme')), await store.create(newKey('acme'))];
    await store.touch([one.id, two.id, 'key_doesnotexist'], 1_900_000_000.9);
    t.is((await store.get(one.id))?.lastUsedAt, 1_900_000_000);
    t.is((await store.findByHash(two.hash))?.lastUsedAt, 1_900_000_000);
    await store.touch([one.id], 1_800_000_000);
    t.is((await store.get(one.id))?.lastUsedAt, 1_900_000_000);
    await store.touch([one.id], 1_900_000_060);
    t.is((await store.get(one.id))?.lastUsedAt, 1_900_000_060);
    await store.touch([], 1_900_000_120);
    t.false('lastUsedAt' in ((await store.get(untouched.id)) as object));
    // Ids for several statements (the Knex store writes them in slices).
    const many = [...Array.from({ length: 1200 }, (_, i) => `key_unknown${i}`), untouched.id];
    await store.touch(many, 1_900_000_180);
    t.is((await store.get(untouched.id))?.lastUsedAt, 1_900_000_180);
  });

  test(`${name}: a key's MCP grant is kept, replaced by an update, removed with []; a key without one has none`, async (t) => {
    const store = await makeStore();
    const granted = await store.create(newKey('acme', { mcpTools: ['github/*', 'search/web_search'] }));
    t.deepEqual(granted.mcpTools, ['github/*', 'search/web_search']);
    t.deepEqual(await store.findByHash(granted.hash), granted);
    t.deepEqual((await store.update(granted.id, { mcpTools: ['crm/*'] }))?.mcpTools, ['crm/*']);
    t.deepEqual((await store.update(granted.id, { name: 'agent' }))?.mcpTools, ['crm/*']);
    const removed = await store.update(granted.id, { mcpTools: [] });
    t.false(removed !== undefined && 'mcpTools' in removed);
    for (const input of [newKey('acme'), newKey('acme', { mcpTools: [] })]) t.false('mcpTools' in (await store.create(input)));
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
    t.deepEqual(
      (await store.list({ account: 'list-a' })).map((key) => key.id),
      [a1.id, a2.id],
    );
    t.deepEqual(
      (await store.list({ account: 'list-b' })).map((key) => key.id),
      [b1.id],
    );
    const all = (await store.list()).map((key) => key.id);
    for (const id of [a1.id, a2.id, b1.id]) t.true(all.includes(id));
  });

  test(`${name}: revoke marks the key once, says when it was revoked before, and reports unknown ids`, async (t) => {
    const store = await makeStore();
    const created = await store.create(newKey('acme'));
    t.is(await store.revoke(created.id), 'revoked');
    const revokedAt = (await store.findByHash(created.hash))?.revokedAt;
    t.is(typeof revokedAt, 'number');
    t.is(await store.revoke(created.id), 'already_revoked');
    t.is((await store.findByHash(created.hash))?.revokedAt, revokedAt);
    t.is(await store.revoke('key_doesnotexist'), 'not_found');
    // Of revocations at once, exactly one revokes.
    const raced = await store.create(newKey('acme'));
    const outcomes = await Promise.all(Array.from({ length: 5 }, () => store.revoke(raced.id)));
    t.deepEqual(outcomes.sort(), ['already_revoked', 'already_revoked', 'already_revoked', 'already_revoked', 'revoked']);
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

  test(`${name}: get finds a key by id, revoked ones included`, async (t) => {
    const store = await makeStore();
    const created = await store.create(newKey('acme'));
    await store.revoke(created.id);
    t.deepEqual(await store.get(created.id), await store.findByHash(created.hash));
    t.is(await store.get('key_doesnotexist'), undefined);
  });

  test(`${name}: update changes what it names, keeps the rest, and null (or no limit) clears limits, models and expiry`, async (t) => {
    const store = await makeStore();
    const created = await store.create(newKey('acme', { models: ['echo-1'], expiresAt: 2_000_000_000, limits: { tokensPerMinute: 10 } }));
    const updated = await store.update(created.id, { scopes: ['models:read'], limits: { requestsPerMinute: 5 } });
    t.deepEqual(updated, { ...created, scopes: ['models:read'], limits: { requestsPerMinute: 5 } });
    t.deepEqual(await store.findByHash(created.hash), updated);
    const cleared = await store.update(created.id, { models: null, expiresAt: null, limits: null });
    const unlimited = { ...created };
    delete unlimited.limits;
    t.deepEqual(cleared, { ...unlimited, scopes: ['models:read'], models: null, expiresAt: null });
    t.deepEqual(await store.update(created.id, {}), cleared);
    await store.update(created.id, { limits: { tokensPerDay: 7 } });
    t.false('limits' in ((await store.update(created.id, { limits: {} })) ?? {}));
    t.deepEqual(await store.findByHash(created.hash), cleared);
    t.is(await store.update('key_doesnotexist', { scopes: ['models:read'] }), undefined);
  });
}

/** `nowSeconds` as a `Date.now() / 1000` clock gives it: with a fraction, which stores must take. */
const NOW = 1_900_000_000.625;

const rotation = (graceSeconds: number, nowSeconds = NOW) => ({
  hash: hashApiKey(`kmg_sk_${Math.random()}`),
  nowSeconds,
  graceEndsAt: Math.floor(nowSeconds) + graceSeconds,
});

/**
 * What every KeyStore's `rotate` must do; run once per implementation. `makeStores` gives two
 * views of the same keys, as two server processes sharing a database have.
 */
export function keyRotationContract(test: StoreContractTest, name: string, makeStores: () => Promise<[KeyStore, KeyStore]>): void {
  test(`${name}: rotate makes a replacement with the old key's account, scopes, models, limits, expiry and MCP grant, and ends the old key after the grace`, async (t) => {
    const [store] = await makeStores();
    const expiresAt = Math.floor(NOW) + 86_400;
    const old = await store.create(
      newKey('acme', {
        scopes: ['models:read'],
        models: ['echo-1'],
        expiresAt,
        limits: { tokensPerDay: 5 },
        name: 'billing',
        hint: 'oldH',
        mcpTools: ['github/*'],
      }),
    );
    const input = { ...rotation(60), hint: 'newH' };
    const result = await store.rotate(old.id, input);
    if (result.outcome !== 'rotated') return t.fail(result.outcome);
    t.deepEqual(result.old, { ...old, expiresAt: input.graceEndsAt, replacedBy: result.replacement.id });
    t.deepEqual(await store.get(old.id), result.old);
    t.like(result.replacement, {
      account: 'acme',
      hash: input.hash,
      scopes: ['models:read'],
      models: ['echo-1'],
      expiresAt,
      limits: { tokensPerDay: 5 },
      revokedAt: null,
      name: 'billing',
      hint: 'newH',
      replaces: old.id,
      originalId: old.id,
      mcpTools: ['github/*'],
    });
    t.false('replacedBy' in result.replacement);
    t.false('originalId' in old, 'a key that replaced none is its own original');
    t.is(result.replacement.createdAt, Math.floor(NOW));
    t.not(result.replacement.id, old.id);
    t.deepEqual(await store.findByHash(input.hash), result.replacement);
    t.deepEqual(
      (await store.list({ account: 'acme' })).map((key) => key.id),
      [old.id, result.replacement.id],
    );
    // Its own replacement shares the same original: one line of rotations, one budget.
    const second = await store.rotate(result.replacement.id, rotation(60));
    t.like(second, { outcome: 'rotated', replacement: { replaces: result.replacement.id, originalId: old.id } });
  });

  test(`${name}: rotate keeps an expiry sooner than the grace, and the replacement keeps the original expiry`, async (t) => {
    const [store] = await makeStores();
    const expiresAt = Math.floor(NOW) + 30;
    const old = await store.create(newKey('acme', { expiresAt }));
    const result = await store.rotate(old.id, rotation(3600));
    t.like(result, { outcome: 'rotated', old: { expiresAt }, replacement: { expiresAt } });
  });

  test(`${name}: a key rotated once, revoked, expired or unknown is not rotated, and no key is made`, async (t) => {
    const [store] = await makeStores();
    const rotated = await store.create(newKey('acme'));
    const first = await store.rotate(rotated.id, rotation(60));
    t.is(first.outcome, 'rotated');
    const revoked = await store.create(newKey('acme'));
    await store.revoke(revoked.id);
    const expired = await store.create(newKey('acme', { expiresAt: Math.floor(NOW) }));
    const before = await store.list();
    // Still in its grace, the rotated key works, but its replacement is the one to rotate.
    t.deepEqual(await store.rotate(rotated.id, rotation(60)), { outcome: 'replaced' });
    t.deepEqual(await store.rotate(rotated.id, rotation(60, NOW + 3600)), { outcome: 'replaced' });
    t.deepEqual(await store.rotate(revoked.id, rotation(60)), { outcome: 'not_active' });
    t.deepEqual(await store.rotate(expired.id, rotation(60)), { outcome: 'not_active' });
    t.deepEqual(await store.rotate('key_doesnotexist', rotation(60)), { outcome: 'not_found' });
    t.deepEqual(await store.list(), before);
    t.like(await store.get(rotated.id), { expiresAt: Math.floor(NOW) + 60 });
  });

  test(`${name}: a key is active until the second it expires, at a fractional now`, async (t) => {
    const [store] = await makeStores();
    const key = await store.create(newKey('acme', { expiresAt: Math.floor(NOW) + 1 }));
    t.deepEqual(await store.rotate(key.id, rotation(60, Math.floor(NOW) + 1.25)), { outcome: 'not_active' });
    t.is((await store.rotate(key.id, rotation(60, Math.floor(NOW) + 0.75))).outcome, 'rotated');
  });

  test(`${name}: ten rotations of one key at once, through two stores on the same data, make exactly one new key`, async (t) => {
    const [one, two] = await makeStores();
    const old = await one.create(newKey('parallel'));
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? one : two).rotate(old.id, rotation(60))));
    const rotated = results.filter((result) => result.outcome === 'rotated');
    t.is(rotated.length, 1);
    t.deepEqual(
      results.filter((result) => result.outcome !== 'rotated'),
      Array.from({ length: 9 }, () => ({ outcome: 'replaced' })),
    );
    t.is((await two.list({ account: 'parallel' })).length, 2);
  });
}
