import type { StoreContractTest } from './store-contract-test.js';
import type { AdminTokenStore } from '../admin/admin-token-store.js';
import { createAdminToken, hashAdminToken } from '../admin/admin-tokens.js';

/** The behaviour every AdminTokenStore must have; run once per implementation. */
export function adminTokenStoreContract(test: StoreContractTest, name: string, makeStore: () => Promise<AdminTokenStore>): void {
  test(`${name}: a created token is found by its hash and its id, and listed in creation order`, async (t) => {
    const store = await makeStore();
    const { token, record } = await createAdminToken(store, { prefix: 'kmg', name: 'ops' });
    const { record: second } = await createAdminToken(store, { prefix: 'kmg' });
    t.regex(record.id, /^adm_[A-Za-z0-9]{24}$/);
    t.is(record.hash, hashAdminToken(token));
    t.like(record, { name: 'ops', revokedAt: null });
    t.is(second.name, null);
    t.deepEqual(await store.findByHash(record.hash), record);
    t.deepEqual(await store.get(record.id), record);
    t.deepEqual(
      (await store.list()).map((listed) => listed.id),
      [record.id, second.id],
    );
    t.is(await store.findByHash(hashAdminToken('kmg_admin_unknown')), undefined);
    t.is(await store.get('adm_doesnotexist'), undefined);
  });

  test(`${name}: revoke marks the token once and reports unknown ids`, async (t) => {
    const store = await makeStore();
    const { record } = await createAdminToken(store, { prefix: 'kmg' });
    t.true(await store.revoke(record.id));
    const revokedAt = (await store.get(record.id))?.revokedAt;
    t.is(typeof revokedAt, 'number');
    t.true(await store.revoke(record.id));
    t.is((await store.findByHash(record.hash))?.revokedAt, revokedAt);
    t.false(await store.revoke('adm_doesnotexist'));
  });
}
