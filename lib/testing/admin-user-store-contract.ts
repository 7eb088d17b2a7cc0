import type { StoreContractTest } from './store-contract-test.js';
import type { AdminUserStore, SignedInIdentity } from '../admin/admin-user-store.js';

const identity = (subject: string, changes: Partial<SignedInIdentity> = {}): SignedInIdentity => ({
  issuer: 'https://id.example.com',
  subject,
  email: `${subject}@example.com`,
  name: `Person ${subject}`,
  claimRole: 'viewer',
  ...changes,
});

/** The behaviour every AdminUserStore must have; run once per implementation. */
export function adminUserStoreContract(test: StoreContractTest, name: string, makeStore: () => Promise<AdminUserStore>): void {
  test(`${name}: the first sign-in creates a user, later ones update what the provider says and keep the rest`, async (t) => {
    const store = await makeStore();
    const first = await store.signIn(identity('alice'), 1_900_000_000);
    t.regex(first.id, /^usr_[A-Za-z0-9]{24}$/);
    t.deepEqual(first, {
      id: first.id,
      ...identity('alice'),
      role: null,
      disabled: false,
      createdAt: 1_900_000_000,
      lastSignInAt: 1_900_000_000,
    });
    await store.update(first.id, { role: 'operator' });
    const again = await store.signIn(identity('alice', { email: null, name: 'Alice', claimRole: null }), 1_900_000_100);
    t.deepEqual(again, { ...first, email: null, name: 'Alice', claimRole: null, role: 'operator', lastSignInAt: 1_900_000_100 });
    t.deepEqual(await store.get(first.id), again);
    t.is(await store.get('usr_000000000000000000000000'), undefined);
  });

  test(`${name}: a user is one subject of one issuer; the list is in the order of first sign-ins`, async (t) => {
    const store = await makeStore();
    const a = await store.signIn(identity('a'), 100);
    const b = await store.signIn(identity('a', { issuer: 'https://other.example.com' }), 200);
    const c = await store.signIn(identity('c'), 300);
    await store.signIn(identity('a'), 400);
    t.not(a.id, b.id);
    t.deepEqual(
      (await store.list()).map((user) => user.id),
      [a.id, b.id, c.id],
    );
  });

  test(`${name}: update changes the role and disabled flag given, and nothing for an unknown id`, async (t) => {
    const store = await makeStore();
    const user = await store.signIn(identity('bob'), 100);
    t.deepEqual(await store.update(user.id, { disabled: true }), { ...user, disabled: true });
    t.deepEqual(await store.update(user.id, { role: 'admin' }), { ...user, disabled: true, role: 'admin' });
    t.deepEqual(await store.update(user.id, { role: null, disabled: false }), user);
    t.deepEqual(await store.update(user.id, {}), user);
    t.is(await store.update('usr_000000000000000000000000', { disabled: true }), undefined);
  });
}
