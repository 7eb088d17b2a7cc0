import test from 'ava';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { usageRecord, usageStoreContract } from '../contracts/usage-store.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';

const databases: TestDatabase[] = [];
test.after.always(() => Promise.all(databases.map((db) => db.destroy())));

async function knexStore(open: () => Promise<TestDatabase>): Promise<KnexUsageStore> {
  const db = await open();
  databases.push(db);
  await migrate(db.knex);
  return new KnexUsageStore(db.knex);
}

usageStoreContract(test, 'memory', async () => new MemoryUsageStore());
usageStoreContract(test, 'sqlite', () => knexStore(sqliteDatabase));
usageStoreContract(withPostgres(test), 'postgres', () => knexStore(postgresDatabase));

// The recorder tries a failed batch again: a batch stored in part would then be counted twice.
for (const [name, gate, open] of [
  ['sqlite', test, sqliteDatabase],
  ['postgres', withPostgres(test), postgresDatabase],
] as const) {
  gate(`${name}: a batch with one record the database refuses (its 651st) stores nothing`, async (t) => {
    const store = await knexStore(open);
    const batch = Array.from({ length: 700 }, () => usageRecord());
    batch[650] = { ...usageRecord(), account: null as unknown as string };
    await t.throwsAsync(store.insert(batch), { any: true });
    t.deepEqual(await store.list(), []);
  });
}
