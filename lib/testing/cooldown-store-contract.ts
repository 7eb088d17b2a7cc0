import type { CooldownStore } from '../models/routing/cooldown-store.js';
import type { StoreContractTest } from './store-contract-test.js';

const POLICY = { failures: 3, windowMs: 10_000, cooldownMs: 30_000, maxCooldownMs: 300_000 };
const T0 = Date.parse('2026-11-25T12:00:00Z');

/**
 * What every `CooldownStore` does, run against each of them: a fresh store (or one whose keys
 * nobody else uses) from `make`.
 */
export function cooldownStoreContract(test: StoreContractTest, name: string, make: () => Promise<CooldownStore>): void {
  test(`${name}: the third failure within the window begins the cooldown, which ends on time`, async (t) => {
    const store = await make();
    t.is(await store.fail('a/m', POLICY, T0), null);
    t.is(await store.fail('a/m', POLICY, T0 + 1000), null);
    t.deepEqual(await store.coolingUntil(['a/m', 'b/m'], T0 + 1000), [null, null]);
    t.is(await store.fail('a/m', POLICY, T0 + 2000), T0 + 32_000);
    t.deepEqual(await store.coolingUntil(['a/m', 'b/m'], T0 + 2000), [T0 + 32_000, null]);
    // A failure while it cools down changes nothing.
    t.is(await store.fail('a/m', POLICY, T0 + 3000), null);
    t.deepEqual(await store.coolingUntil(['a/m'], T0 + 32_000), [null]);
  });

  test(`${name}: failures outside the window do not add up`, async (t) => {
    const store = await make();
    await store.fail('a/m', POLICY, T0);
    await store.fail('a/m', POLICY, T0 + 1000);
    t.is(await store.fail('a/m', POLICY, T0 + 10_500), null);
    t.deepEqual(await store.coolingUntil(['a/m'], T0 + 10_500), [null]);
  });

  test(`${name}: a retry-after longer than the cooldown is the cooldown`, async (t) => {
    const store = await make();
    await store.fail('a/m', POLICY, T0, 60_000);
    await store.fail('a/m', POLICY, T0, 60_000);
    t.is(await store.fail('a/m', POLICY, T0, 60_000), T0 + 60_000);
    t.is(await store.fail('b/m', { ...POLICY, failures: 1 }, T0, 5_000), T0 + 30_000);
  });

  test(`${name}: a retry-after longer than maxCooldownMs cools down for maxCooldownMs`, async (t) => {
    const store = await make();
    // 999,999,999 s: about 31.7 years.
    t.is(await store.fail('a/m', { ...POLICY, failures: 1 }, T0, 999_999_999_000), T0 + 300_000);
    t.deepEqual(await store.coolingUntil(['a/m'], T0 + 300_000), [null]);
  });
}
