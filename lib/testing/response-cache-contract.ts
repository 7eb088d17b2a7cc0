import type { ResponseCache } from '../models/cache/response-cache.js';
import type { StoreContractTest } from './store-contract-test.js';

/** The largest entry the suite asks `make` for a store to keep. */
const MAX_ENTRY_BYTES = 4096;

/**
 * What every `ResponseCache` does, run against each of them: a fresh store (or one whose keys
 * nobody else uses) from `make`, which keeps entries of up to `maxEntryBytes` bytes.
 * @example responseCacheContract(test, 'MemoryResponseCache', async ({ maxEntryBytes }) => new MemoryResponseCache({ maxEntryBytes }))
 */
export function responseCacheContract(test: StoreContractTest, name: string, make: (bounds: { maxEntryBytes: number }) => Promise<ResponseCache>): void {
  test(`${name}: an entry is found by its account and key, and by nothing else`, async (t) => {
    const cache = await make({ maxEntryBytes: MAX_ENTRY_BYTES });
    t.true(await cache.set('acme', 'k1', '{"answer":1}', 60));
    t.is(await cache.get('acme', 'k1'), '{"answer":1}');
    t.is(await cache.get('acme', 'k2'), undefined);
    t.is(await cache.get('globex', 'k1'), undefined);
    t.true(await cache.set('acme', 'k1', '{"answer":2}', 60));
    t.is(await cache.get('acme', 'k1'), '{"answer":2}');
  });

  test(`${name}: an entry larger than the store keeps is declined, and not found`, async (t) => {
    const cache = await make({ maxEntryBytes: MAX_ENTRY_BYTES });
    t.false(await cache.set('acme', 'big', 'x'.repeat(MAX_ENTRY_BYTES + 1), 60));
    t.is(await cache.get('acme', 'big'), undefined);
  });

  test(`${name}: a purge of one account leaves the others', whatever their names`, async (t) => {
    const cache = await make({ maxEntryBytes: MAX_ENTRY_BYTES });
    for (const account of ['acme', '*', 'acme*', 'a:b', 'é']) await cache.set(account, 'k', account, 60);
    await cache.purge('*');
    t.is(await cache.get('*', 'k'), undefined);
    for (const account of ['acme', 'acme*', 'a:b', 'é']) t.is(await cache.get(account, 'k'), account);
    await cache.purge('acme');
    t.is(await cache.get('acme', 'k'), undefined);
    t.is(await cache.get('acme*', 'k'), 'acme*');
  });

  test(`${name}: a purge of everything leaves nothing`, async (t) => {
    const cache = await make({ maxEntryBytes: MAX_ENTRY_BYTES });
    await cache.set('acme', 'k1', 'one', 60);
    await cache.set('globex', 'k2', 'two', 60);
    await cache.purge();
    t.is(await cache.get('acme', 'k1'), undefined);
    t.is(await cache.get('globex', 'k2'), undefined);
  });
}
