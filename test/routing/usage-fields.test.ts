import test from 'ava';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import type { UsageRecord, UsageStore } from '../../lib/usage/usage-store.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';

const databases: TestDatabase[] = [];
test.after.always(() => Promise.all(databases.map((db) => db.destroy())));

async function knexStore(open: () => Promise<TestDatabase>): Promise<UsageStore> {
  const db = await open();
  databases.push(db);
  await migrate(db.knex);
  return new KnexUsageStore(db.knex);
}

const routed: UsageRecord = {
  time: Date.parse('2026-11-25T12:00:00Z'),
  requestId: 'req_00000000000000000000000000000028',
  keyId: 'key_a',
  account: 'acme',
  endpoint: '/v1/chat/completions',
  model: 'smart',
  provider: 'openai-west',
  upstreamModel: 'gpt-4.1',
  attempts: 2,
  status: 200,
  stream: false,
  inputTokens: 3,
  outputTokens: 2,
  attachments: 0,
  latencyMs: 12,
  upstreamFirstByteMs: 4,
  upstreamMs: 9,
  costPicoUsd: 0,
};

for (const [name, make, gate] of [
  ['memory', async () => new MemoryUsageStore(), test],
  ['sqlite', () => knexStore(() => sqliteDatabase()), test],
  ['postgres', () => knexStore(postgresDatabase), withPostgres(test)],
] as const) {
  gate(`${name}: a routed call's record keeps the upstream model that answered and its attempts`, async (t) => {
    const store = await make();
    await store.insert([routed]);
    t.like(await store.list(), [{ provider: 'openai-west', upstreamModel: 'gpt-4.1', attempts: 2 }]);
  });
}
