import test, { type ExecutionContext } from 'ava';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { adminApp } from '../helpers/admin-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { uploadForm } from '../helpers/multipart.js';
import { checkedFetch } from '../helpers/openapi.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';
import { referenceApp } from '../spec/reference-app.js';

// The list of every account on both deployments: each account with a key, its active keys, its
// files and this UTC month's calls. Every answer is checked against docs/openapi.json.

const problems: string[] = [];
test.after('every answer agrees with docs/openapi.json', (t) => t.deepEqual(problems, []));
const checked = checkedFetch(problems);

async function openServer(t: ExecutionContext, env: Record<string, string>) {
  const server = await referenceApp(undefined, env);
  t.teardown(() => server.close());
  const { token } = await createAdminToken(server.deployment.adminTokens, { prefix: server.config.gateway.keyPrefix, name: 'tests' });
  const admin = async (method: string, path: string, body?: unknown) => {
    const response = await checked(`${server.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${token}` },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as { id: string; key: string; data: Array<Record<string, unknown>> } };
  };
  return { server, admin };
}

function call(keyId: string, account: string, time: number, tokens: [number, number]): UsageRecord {
  return {
    time,
    requestId: `req_${keyId}_${time}`,
    keyId,
    account,
    endpoint: '/v1/chat/completions',
    model: 'test-model',
    provider: 'mock',
    status: 200,
    stream: false,
    inputTokens: tokens[0],
    outputTokens: tokens[1],
    attachments: 0,
    latencyMs: 5,
    upstreamFirstByteMs: 1,
    upstreamMs: 2,
    costPicoUsd: 0,
  };
}

const deployments = [
  ['sqlite', test, async () => ({ env: {}, drop: async () => undefined })],
  [
    'postgres+redis',
    withRedis(withPostgres(test)),
    async () => {
      const db = await throwawayPostgres();
      return { env: { DATABASE_URL: db.url, REDIS_URL }, drop: db.drop };
    },
  ],
] as const;

for (const [name, gated, database] of deployments) {
  gated(`${name}: GET /accounts lists every account with a key: active keys, files kept, and only this UTC month's calls`, async (t) => {
    const { env, drop } = await database();
    t.teardown(drop);
    const { server, admin } = await openServer(t, env);
    t.deepEqual((await admin('GET', '/accounts')).body, { object: 'list', data: [] });

    const first = await admin('POST', '/keys', { account: 'zeta' });
    const second = await admin('POST', '/keys', { account: 'zeta' });
    const revoked = await admin('POST', '/keys', { account: 'acme <b>' });
    t.is((await admin('POST', `/keys/${revoked.body.id}/revoke`)).status, 200);
    const pdf = makePdf(1);
    const uploaded = await fetch(`${server.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${first.body.key}` }, body: uploadForm(pdf, 'a.pdf') });
    t.is(uploaded.status, 200);
    await uploaded.arrayBuffer();
    const now = new Date();
    const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
    await server.deployment.usageStore.insert([
      call(first.body.id, 'zeta', monthStart, [10, 20]),
      call(second.body.id, 'zeta', monthStart + 1000, [1, 2]),
      call(first.body.id, 'zeta', monthStart - 1, [500, 500]), // last month: not counted
      call(revoked.body.id, 'acme <b>', monthStart + 5, [7, 0]),
    ]);

    const listed = await admin('GET', '/accounts');
    t.is(listed.status, 200);
    t.deepEqual(listed.body.data, [
      { object: 'account_summary', account: 'acme <b>', keys: 0, files: 0, bytes: 0, requests_this_month: 1, input_tokens_this_month: 7, output_tokens_this_month: 0 },
      { object: 'account_summary', account: 'zeta', keys: 2, files: 1, bytes: pdf.length, requests_this_month: 2, input_tokens_this_month: 11, output_tokens_this_month: 22 },
    ]);
  });
}

test('GET /accounts needs an admin credential', async (t) => {
  const server = await referenceApp(undefined, {});
  t.teardown(() => server.close());
  const response = await checked(`${server.url}/admin/v1/accounts`);
  t.is(response.status, 401);
  await response.arrayBuffer();
});

test("without a usage store the month's figures are null; an expired key is no active key", async (t) => {
  const app = await adminApp();
  t.teardown(() => app.close());
  await app.admin('POST', '/keys', { account: 'acme' });
  const expiring = await app.admin('POST', '/keys', { account: 'acme', expires_at: app.clock.seconds + 60 });
  t.is(expiring.status, 201);
  await expiring.arrayBuffer();
  app.clock.seconds += 60;
  const listed = await app.admin('GET', '/accounts');
  t.deepEqual(((await listed.json()) as { data: unknown[] }).data, [
    { object: 'account_summary', account: 'acme', keys: 1, files: 0, bytes: 0, requests_this_month: null, input_tokens_this_month: null, output_tokens_this_month: null },
  ]);
  t.deepEqual(app.problems, []);
});
