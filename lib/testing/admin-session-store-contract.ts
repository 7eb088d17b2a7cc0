import type { StoreContractTest } from './store-contract-test.js';
import type { AdminSession, AdminSessionStore } from '../admin/admin-session-store.js';

const session = (hash: string, expiresAt: number): AdminSession => ({
  hash,
  tokenId: 'adm_000000000000000000000001',
  userId: null,
  csrfToken: `csrf-${hash.slice(0, 8)}`,
  createdAt: expiresAt - 3600,
  expiresAt,
  lastSeenAt: expiresAt - 3600,
});

/**
 * The time a store is asked at: a whole second plus a fraction, as a `Date.now() / 1000` clock
 * gives it; sessions' own times are whole seconds.
 */
const at = (seconds: number) => seconds + 0.375;

/** The behaviour every AdminSessionStore must have; run once per implementation. */
export function adminSessionStoreContract(test: StoreContractTest, name: string, makeStore: () => Promise<AdminSessionStore>): void {
  test(`${name}: a session is found by its hash until the second it expires`, async (t) => {
    const store = await makeStore();
    await store.create(session('a'.repeat(64), 2_000_000_000));
    t.deepEqual(await store.get('a'.repeat(64), at(1_999_999_999)), session('a'.repeat(64), 2_000_000_000));
    t.is(await store.get('a'.repeat(64), at(2_000_000_000)), undefined);
    t.is(await store.get('b'.repeat(64), at(1_000_000_000)), undefined);
  });

  test(`${name}: delete ends one session, removeExpired every expired one`, async (t) => {
    const store = await makeStore();
    for (const [hash, expiresAt] of [
      ['1', 100],
      ['2', 200],
      ['3', 300],
      ['4', 400],
    ] as const) {
      await store.create(session(hash.repeat(64), expiresAt));
    }
    await store.delete('4'.repeat(64));
    await store.delete('5'.repeat(64));
    t.is(await store.get('4'.repeat(64), at(0)), undefined);
    t.is(await store.removeExpired(at(200)), 2);
    t.is(await store.removeExpired(at(200)), 0);
    // Gone, not merely hidden: get() at an earlier time finds nothing either.
    t.is(await store.get('1'.repeat(64), at(0)), undefined);
    t.truthy(await store.get('3'.repeat(64), at(0)));
  });

  test(`${name}: a fractional now (a Date.now() / 1000 clock) works and expires at the same instant`, async (t) => {
    const store = await makeStore();
    await store.create(session('c'.repeat(64), 2_000_000_000));
    await store.create(session('d'.repeat(64), 2_000_000_100));
    t.truthy(await store.get('c'.repeat(64), 1_999_999_999.999));
    t.is(await store.get('c'.repeat(64), 2_000_000_000.25), undefined);
    t.is(await store.removeExpired(2_000_000_099.5), 1);
    t.truthy(await store.get('d'.repeat(64), 2_000_000_099.5));
  });

  test(`${name}: a user's session has no token, and touch records when it was last used`, async (t) => {
    const store = await makeStore();
    const users: AdminSession = { ...session('e'.repeat(64), 2_000_000_000), tokenId: null, userId: 'usr_000000000000000000000001' };
    await store.create(users);
    t.deepEqual(await store.get('e'.repeat(64), at(1_999_990_000)), users);
    await store.touch('e'.repeat(64), at(1_999_990_000));
    await store.touch('f'.repeat(64), at(1_999_990_000));
    t.deepEqual(await store.get('e'.repeat(64), at(1_999_990_001)), { ...users, lastSeenAt: 1_999_990_000 });
    t.is(await store.get('f'.repeat(64), at(1_999_990_001)), undefined);
  });

  test(`${name}: deleteMatching ends a person's sessions, or those opened under one provider session, and no other`, async (t) => {
    const store = await makeStore();
    const of = (hash: string, userId: string, oidcSid?: string): AdminSession => ({
      ...session(hash.repeat(64), 2_000_000_000),
      tokenId: null,
      userId,
      ...(oidcSid !== undefined && { oidcSid }),
    });
    const ada = 'usr_00000000000000000000000a';
    const bob = 'usr_00000000000000000000000b';
    for (const one of [of('1', ada, 'sid-1'), of('2', ada, 'sid-2'), of('3', ada), of('4', bob, 'sid-1'), of('5', bob, 'sid-3')]) await store.create(one);
    await store.create(session('6'.repeat(64), 2_000_000_000));
    t.deepEqual(await store.get('1'.repeat(64), at(0)), of('1', ada, 'sid-1'));
    t.is(await store.deleteMatching({ userId: ada, oidcSid: 'sid-1' }), 1);
    t.truthy(await store.get('4'.repeat(64), at(0)), "another person's session under the same sid");
    t.is(await store.deleteMatching({ oidcSid: 'sid-3' }), 1);
    t.is(await store.deleteMatching({ userId: ada }), 2);
    t.is(await store.deleteMatching({ userId: ada }), 0);
    t.deepEqual(await Promise.all(['1', '2', '3', '4', '5', '6'].map(async (hash) => (await store.get(hash.repeat(64), at(0))) !== undefined)), [
      false,
      false,
      false,
      true,
      false,
      true,
    ]);
    await t.throwsAsync(store.deleteMatching({} as never), { instanceOf: TypeError });
  });
}
