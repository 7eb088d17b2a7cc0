import test from 'ava';
import { MemoryMcpCallStore } from '../../lib/mcp/call-store.js';
import { cachedMcpGrants, MemoryMcpGrantStore } from '../../lib/mcp/grant-store.js';
import { KnexMcpCallStore } from '../../lib/stores/knex/mcp-call-store.js';
import { KnexMcpGrantStore } from '../../lib/stores/knex/mcp-grant-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { mcpCallStoreContract, mcpGrantStoreContract } from '../../lib/testing/mcp-store-contract.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';

const databases: TestDatabase[] = [];
test.after.always(() => Promise.all(databases.map((database) => database.destroy())));

const migrated = async (open: () => Promise<TestDatabase>) => {
  const database = await open();
  databases.push(database);
  await migrate(database.knex);
  return database.knex;
};

mcpGrantStoreContract(test, 'memory', async () => new MemoryMcpGrantStore());
mcpGrantStoreContract(test, 'sqlite', async () => new KnexMcpGrantStore(await migrated(sqliteDatabase)));
mcpGrantStoreContract(withPostgres(test), 'postgres', async () => new KnexMcpGrantStore(await migrated(postgresDatabase)));
mcpCallStoreContract(test, 'memory', async () => new MemoryMcpCallStore());
mcpCallStoreContract(test, 'sqlite', async () => new KnexMcpCallStore(await migrated(sqliteDatabase)));
mcpCallStoreContract(withPostgres(test), 'postgres', async () => new KnexMcpCallStore(await migrated(postgresDatabase)));

test("cachedMcpGrants() reads an account's grant at most once per ttl, and again after it", async (t) => {
  const store = new MemoryMcpGrantStore();
  let now = 0;
  let reads = 0;
  const counted = { get: (account: string) => ((reads += 1), store.get(account)) };
  const cached = cachedMcpGrants(counted, { ttlMs: 1000, nowMs: () => now });
  await store.set('acme', ['github/*']);
  t.deepEqual(await cached.get('acme'), ['github/*']);
  await store.set('acme', []);
  t.deepEqual(await cached.get('acme'), ['github/*']);
  now = 1000;
  t.deepEqual(await cached.get('acme'), []);
  t.is(reads, 2);
});
