import test, { type ExecutionContext } from 'ava';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import { checkedFetch } from '../helpers/openapi.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';
import { referenceApp } from '../spec/reference-app.js';

// Keys an operator can tell apart, on both deployments: a name, the secret's hint, the links of a
// rotation, the last use, and the list found by a prefix. Every answer is checked against docs/openapi.json.

const problems: string[] = [];
test.after('every answer agrees with docs/openapi.json', (t) => t.deepEqual(problems, []));
const checked = checkedFetch(problems);

interface KeyBody {
  id: string;
  key?: string;
  account: string;
  name: string | null;
  hint: string | null;
  last_used_at: number | null;
  replaces: { id: string; expires_at?: number } | null;
  replaced_by: { id: string } | null;
}

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
    return { status: response.status, body: (await response.json()) as KeyBody & { data: KeyBody[]; error: { code: string } } };
  };
  return { server, admin };
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
  gated(`${name}: a key's name is set at creation, changed and removed by PATCH; the hint is the secret's last four characters, never more`, async (t) => {
    const { env, drop } = await database();
    t.teardown(drop);
    const { server, admin } = await openServer(t, env);
    const created = await admin('POST', '/keys', { account: 'acme', name: '  Billing job \u{1F4B8} ' });
    t.is(created.status, 201);
    t.like(created.body, { name: 'Billing job \u{1F4B8}', last_used_at: null, replaces: null, replaced_by: null });
    t.is(created.body.hint, (created.body.key as string).slice(-4));
    const stored = await server.deployment.knex('kmg_api_keys').where({ id: created.body.id }).first();
    t.is(stored.hint, created.body.key?.slice(-4));
    t.false(JSON.stringify(stored).includes(created.body.key?.slice(-5) as string));
    t.like((await admin('PATCH', `/keys/${created.body.id}`, { name: 'Invoices' })).body, { name: 'Invoices', hint: created.body.hint });
    t.like((await admin('GET', `/keys/${created.body.id}`)).body, { name: 'Invoices' });
    t.like((await admin('PATCH', `/keys/${created.body.id}`, { name: null })).body, { name: null });
    t.like((await admin('POST', '/keys', { account: 'acme' })).body, { name: null });

    for (const bad of ['', '   ', 'a'.repeat(101), 'line\nbreak', 'right\u202Eleft', 'half\ud800', 42]) {
      const answer = await admin('POST', '/keys', { account: 'refused', name: bad });
      t.is(answer.status, 400, JSON.stringify(bad));
      t.is(answer.body.error.code, 'invalid_name');
      t.is((await admin('PATCH', `/keys/${created.body.id}`, { name: bad })).status, 400);
    }
    t.is((await admin('GET', '/keys?account=refused')).body.data.length, 0);
    t.like((await admin('POST', '/keys', { account: 'acme', name: '\u{1F600}'.repeat(100) })).body, { name: '\u{1F600}'.repeat(100) });
  });

  gated(`${name}: a rotation links the keys both ways, keeps the name and gives the new key its own hint`, async (t) => {
    const { env, drop } = await database();
    t.teardown(drop);
    const { admin } = await openServer(t, env);
    const old = (await admin('POST', '/keys', { account: 'acme', name: 'ci' })).body;
    const rotated = await admin('POST', `/keys/${old.id}/rotate`, { grace_seconds: 60 });
    t.is(rotated.status, 201);
    t.like(rotated.body, { name: 'ci', replaces: { id: old.id }, replaced_by: null });
    t.is(rotated.body.hint, (rotated.body.key as string).slice(-4));
    t.like((await admin('GET', `/keys/${old.id}`)).body, { replaced_by: { id: rotated.body.id }, replaces: null, hint: old.hint });
    t.like((await admin('GET', `/keys/${rotated.body.id}`)).body, { replaces: { id: old.id }, replaced_by: null });
  });

  gated(`${name}: GET /keys?q= finds keys by a prefix of their account, id or name, regardless of case`, async (t) => {
    const { env, drop } = await database();
    t.teardown(drop);
    const { admin } = await openServer(t, env);
    const billing = (await admin('POST', '/keys', { account: 'globex', name: 'Billing' })).body;
    const acme = (await admin('POST', '/keys', { account: 'acme-eu' })).body;
    const other = (await admin('POST', '/keys', { account: 'initech', name: 'ops' })).body;
    const found = async (q: string) => (await admin('GET', `/keys?q=${encodeURIComponent(q)}`)).body.data.map((key) => key.id);
    t.deepEqual(await found('bill'), [billing.id]);
    t.deepEqual(await found('ACME'), [acme.id]);
    t.deepEqual(await found(other.id.slice(0, 10)), [other.id]);
    t.deepEqual(await found('glob'), [billing.id]);
    t.deepEqual(await found('nothing'), []);
    t.deepEqual(await found('ling'), [], 'a prefix, not any part');
    t.deepEqual((await admin('GET', '/keys?account=acme-eu&q=bill')).body.data, []);
    const empty = await admin('GET', '/keys?q=');
    t.is(empty.status, 400);
    t.is(empty.body.error.code, 'invalid_q');
  });

  gated(`${name}: last_used_at is null until the key is used, then the time of its use; ten requests within the minute are one write`, async (t) => {
    const { env, drop } = await database();
    t.teardown(drop);
    const { server, admin } = await openServer(t, env);
    const created = (await admin('POST', '/keys', { account: 'acme' })).body;
    const writes: string[] = [];
    const onQuery = (query: { sql: string }) => {
      if (/^update\b.*last_used_at/i.test(query.sql)) writes.push(query.sql);
    };
    server.deployment.knex.on('query', onQuery);
    t.teardown(() => server.deployment.knex.off('query', onQuery));
    const before = Math.floor(Date.now() / 1000);
    for (let i = 0; i < 10; i += 1) {
      t.is((await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${created.key}` } })).status, 200);
    }
    await server.deployment.keyUses.flush();
    t.is(writes.length, 1, writes.join('\n'));
    const used = (await admin('GET', `/keys/${created.id}`)).body.last_used_at;
    t.true(used !== null && used >= before && used <= Math.floor(Date.now() / 1000), String(used));
    t.like((await admin('GET', '/keys')).body.data.find((key) => key.id === created.id), { last_used_at: used });
  });
}
