import test from 'ava';
import type { Knex } from 'knex';
import { cachedKeyStore } from '../../../lib/auth/cached-key-store.js';
import { KnexFileStore } from '../../../lib/stores/knex/file-store.js';
import { KnexKeyChanges } from '../../../lib/stores/knex/key-changes.js';
import { KnexKeyStore } from '../../../lib/stores/knex/key-store.js';
import { keyChangesContract } from '../../../lib/testing/key-changes-contract.js';
import { keyRotationContract, keyStoreContract } from '../../../lib/testing/key-store-contract.js';
import { contractStores, rotationAcrossProcesses } from '../../helpers/contract-stores.js';
import { sqliteDatabase } from '../../helpers/services.js';

// The contracts of the key store, key rotation and key changes on the Knex stores on SQLite, and
// the stores' options; the other families in the files beside this one.

const stores = contractStores(test);

keyStoreContract(test, 'sqlite KnexKeyStore', () => stores.keyStore(sqliteDatabase));
keyStoreContract(test, 'sqlite KnexKeyStore, prepared reads', () => stores.keyStore(sqliteDatabase, { prepared: true }));
keyStoreContract(test, 'sqlite KnexKeyStore behind cachedKeyStore', async () => cachedKeyStore(await stores.keyStore(sqliteDatabase)));

keyRotationContract(test, 'sqlite KnexKeyStore', () => stores.keyViews(sqliteDatabase));
keyRotationContract(test, 'sqlite KnexKeyStore behind cachedKeyStore', async () => {
  const [one, two] = await stores.keyViews(sqliteDatabase);
  return [cachedKeyStore(one), cachedKeyStore(two)];
});
rotationAcrossProcesses(test, 'sqlite KnexKeyStore', stores, sqliteDatabase);

keyChangesContract(test, 'sqlite KnexKeyChanges', () => stores.keyChangesPair(sqliteDatabase));

test('the Knex stores refuse a timeoutMs that is not a positive integer of milliseconds, when they are made', async (t) => {
  const { knex, destroy } = await sqliteDatabase();
  stores.closeAfter(destroy);
  for (const timeoutMs of [0, -1, 1.5, Number.NaN]) {
    t.throws(() => new KnexKeyStore(knex, { timeoutMs }), { instanceOf: TypeError, message: /timeoutMs/ });
    t.throws(() => new KnexFileStore(knex, { timeoutMs }), { instanceOf: TypeError, message: /timeoutMs/ });
  }
});

test('KnexKeyChanges refuses an interval that is not a positive number', (t) => {
  t.throws(() => new KnexKeyChanges({} as never, { intervalMs: 0 }), { message: /intervalMs/ });
});

test('KnexKeyChanges gives up a read of the version that stalls past timeoutMs, and the next read hears the change', async (t) => {
  t.timeout(10_000, 'the reads stopped at the one that stalled');
  let reads = 0;
  // The version's table on a connection lost for good: its first read never answers, the next ones do.
  const knex = (() => ({
    where: () => ({
      first: () => (++reads === 1 ? new Promise(() => undefined) : Promise.resolve({ version: 2 })),
    }),
  })) as unknown as Knex;
  const changes = new KnexKeyChanges(knex, { intervalMs: 10, timeoutMs: 50 });
  await new Promise<void>((resolve) => changes.subscribe(() => resolve()));
  changes.close();
  t.true(reads >= 2);
});
