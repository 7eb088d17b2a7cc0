import { hash } from 'node:crypto';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { adminAuth } from '../../lib/admin/admin-auth.js';
import { adminRouter } from '../../lib/admin/admin-router.js';
import { adminSessions } from '../../lib/admin/admin-sessions.js';
import { canonicalAdminTokenName, createAdminToken } from '../../lib/admin/admin-tokens.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { MemoryAdminSessionStore } from '../../lib/stores/memory/admin-session-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { runCommand } from '../../reference-server/commands/index.js';
import { adminApp } from '../helpers/admin-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { uploadForm } from '../helpers/multipart.js';
import { checkedFetch } from '../helpers/openapi.js';
import { until } from '../helpers/poll.js';
import { ownRedis } from '../helpers/quota-redis-server.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { spawnCli, tempDataDir } from '../helpers/server-process.js';
import { REDIS_URL, withPostgres, withProgram, withRedis } from '../helpers/services.js';
import { referenceApp } from '../helpers/reference-app.js';

// The admin API: its rules on the reference server's own app (SQLite, in this process); the list of
// accounts and the keys an operator can tell apart, on both deployments; a key's budgets on lib
// composed in memory; the factories' checks; and admin changes while Redis stalls. Every answer to
// `call` and to `openServer`'s `admin` is checked against docs/openapi.json.

// Every top-level await before the first test or hook: AVA takes declarations only until an await
// that waits on I/O.
const app = await referenceApp();
const { prefix, tokens } = { prefix: app.config.gateway.keyPrefix, tokens: app.deployment.adminTokens };
const { token: ADMIN, record: adminRecord } = await createAdminToken(tokens, { prefix, name: 'tests' });
const withRedisServer = await withProgram(test, 'redis-server');

test.after.always(() => app.close());
const problems: string[] = [];
test.after('every answer agrees with docs/openapi.json', (t) => t.deepEqual(problems, []));
const checked = checkedFetch(problems);

const REQUEST_ID = /^req_[A-Za-z0-9]{32}$/;

/** An API key as the admin API answers it: `key`, the secret, only when the key is made. */
interface KeyBody {
  object: string;
  id: string;
  key?: string;
  account: string;
  name: string | null;
  hint: string | null;
  status: string;
  scopes: string[];
  models: string[] | null;
  limits: {
    requests_per_minute: number | null;
    tokens_per_minute: number | null;
    tokens_per_day: number | null;
    cost_per_day: number | null;
    cost_per_month: number | null;
  } | null;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  last_used_at: number | null;
  replaces: { id: string; expires_at?: number } | null;
  replaced_by: { id: string } | null;
  cache: { ttl_seconds: number; per_key: boolean } | null;
  mcp_tools: string[];
}

const call = (method: string, path: string, headers: Record<string, string> = {}, body?: unknown) =>
  checked(`${app.url}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
const admin = (method: string, path: string, body?: unknown) => call(method, `/admin/v1${path}`, { authorization: `Bearer ${ADMIN}` }, body);

async function createKey(body: Record<string, unknown>): Promise<KeyBody & { key: string }> {
  const response = await admin('POST', '/keys', body);
  if (response.status !== 201) throw new Error(`create failed: ${response.status} ${await response.text()}`);
  return (await response.json()) as KeyBody & { key: string };
}

const models = async (key: string) => {
  const response = await call('GET', '/v1/models', { authorization: `Bearer ${key}` });
  return { status: response.status, ids: response.status === 200 ? ((await response.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id) : [] };
};

test('admin routes, known or not, refuse every credential but a live admin token: 401 in Shape A with X-Request-Id', async (t) => {
  const apiKey = await app.keyFor();
  const { token: revoked, record } = await createAdminToken(tokens, { prefix });
  await tokens.revoke(record.id);
  const refusals: Array<[string, Record<string, string>]> = [
    ['no credential', {}],
    ['a Basic credential', { authorization: `Basic ${Buffer.from(`admin:${ADMIN}`).toString('base64')}` }],
    ['the token without its scheme', { authorization: ADMIN }],
    ['a valid API key as the bearer', { authorization: `Bearer ${apiKey}` }],
    ['a valid API key in x-api-key', { 'x-api-key': apiKey }],
    ['the admin token in x-api-key', { 'x-api-key': ADMIN }],
    ['an unknown admin token', { authorization: `Bearer ${prefix}_admin_${'A'.repeat(43)}` }],
    ['a revoked admin token', { authorization: `Bearer ${revoked}` }],
  ];
  for (const path of ['/admin/v1/keys', '/admin/v1/usage', '/admin/v1/no-such-route']) {
    for (const [what, headers] of refusals) {
      const response = await call('GET', path, headers);
      t.is(response.status, 401, `${what} on ${path}`);
      t.regex(response.headers.get('x-request-id') ?? '', REQUEST_ID);
      t.deepEqual(await response.json(), {
        error: { message: 'Invalid admin token', type: 'authentication_error', param: null, code: 'invalid_admin_token' },
      });
    }
  }
  t.is((await admin('GET', '/no-such-route')).status, 404, 'with the token, an unknown route is only then unknown');
});

test('an admin token never opens a /v1 route: 401 invalid_api_key, in either header', async (t) => {
  for (const headers of [{ authorization: `Bearer ${ADMIN}` }, { 'x-api-key': ADMIN }]) {
    for (const path of ['/v1/models', '/v1/files']) {
      const response = await call('GET', path, headers);
      t.is(response.status, 401);
      t.is(((await response.json()) as { error: { code: string } }).error.code, 'invalid_api_key');
    }
  }
});

test('POST /keys: 201 with the secret this once; it works at once, is stored as its SHA-256 only and no other answer shows it', async (t) => {
  const created = await createKey({ account: 'secret-once' });
  t.regex(created.key, new RegExp(`^${prefix}_sk_[A-Za-z0-9_-]{43}$`));
  t.like(created, { object: 'api_key', account: 'secret-once', status: 'active', models: null, limits: null, expires_at: null, revoked_at: null });
  t.deepEqual(created.scopes, [
    'chat:completions',
    'responses:create',
    'messages:create',
    'models:read',
    'files:write',
    'files:read',
    'files:delete',
    'embeddings:create',
    'mcp:call',
  ]);
  t.is((await models(created.key)).status, 200);

  const stored = await app.deployment.knex('kmg_api_keys').where({ id: created.id }).first();
  t.is(stored.hash, hash('sha256', created.key, 'hex'));
  t.false(JSON.stringify(stored).includes(created.key.slice(-43)));
  const answers = [
    await admin('GET', `/keys/${created.id}`),
    await admin('GET', '/keys?account=secret-once'),
    await admin('GET', '/keys'),
    await admin('PATCH', `/keys/${created.id}`, { scopes: ['models:read'] }),
    await admin('POST', `/keys/${created.id}/revoke`),
  ];
  for (const answer of answers) {
    t.is(answer.status, 200);
    const text = await answer.text();
    t.false(text.includes(created.key.slice(-43)));
    t.false(text.includes('"key"'));
  }
});

test('every change is validated: 400 naming the field, and nothing is created or changed', async (t) => {
  const existing = await createKey({ account: 'validation', scopes: ['models:read'] });
  const past = Math.floor(Date.now() / 1000) - 1;
  const cases: Array<[string, string, unknown, string, RegExp]> = [
    ['POST', '/keys', { account: 'validation', scopes: ['files:everything'] }, 'invalid_scopes', /'scopes': unknown scope 'files:everything'/],
    ['POST', '/keys', { account: 'validation', scopes: [] }, 'invalid_scopes', /'scopes'/],
    ['POST', '/keys', { account: 'validation', scopes: 'models:read' }, 'invalid_scopes', /'scopes'/],
    ['POST', '/keys', { account: 'validation', models: ['gpt-none'] }, 'invalid_models', /'models': unknown model 'gpt-none'/],
    ['POST', '/keys', { account: 'validation', expires_at: past }, 'invalid_expires_at', /'expires_at'.*future/],
    ['POST', '/keys', { account: 'validation', expires_at: '2030-01-01' }, 'invalid_expires_at', /'expires_at'/],
    ['POST', '/keys', { account: 'validation', expires_at: 2_000_000_000.5 }, 'invalid_expires_at', /'expires_at'/],
    ['POST', '/keys', { account: 'validation', limits: { tokens_per_day: 0 } }, 'invalid_limits', /'limits.tokens_per_day'/],
    ['POST', '/keys', { account: 'validation', limits: { tokens_per_hour: 5 } }, 'unknown_field', /'limits.tokens_per_hour'/],
    ['POST', '/keys', { account: 'validation', limits: [] }, 'invalid_limits', /'limits'/],
    ['POST', '/keys', { account: 'validation', owner: 'me' }, 'unknown_field', /'owner'/],
    ['POST', '/keys', {}, 'invalid_account', /'account'/],
    ['POST', '/keys', { account: '  ' }, 'invalid_account', /'account'/],
    ['POST', '/keys', { account: 'a\u0000b' }, 'invalid_account', /'account'/],
    ['POST', '/keys', { account: 'a'.repeat(256) }, 'invalid_account', /'account'/],
    ['POST', '/keys', '{"account":', 'invalid_json', /JSON/],
    ['GET', '/keys?account=', undefined, 'invalid_account', /'account'/],
    ['GET', '/keys?q=a&q=b', undefined, 'invalid_q', /'q'/],
    ['GET', '/keys?owner=me', undefined, 'unknown_field', /'owner'/],
    ['PATCH', `/keys/${existing.id}`, { scopes: ['nope'] }, 'invalid_scopes', /'scopes'/],
    ['PATCH', `/keys/${existing.id}`, { models: ['gpt-none'] }, 'invalid_models', /'models'/],
    ['PATCH', `/keys/${existing.id}`, { expires_at: past }, 'invalid_expires_at', /'expires_at'/],
    ['PATCH', `/keys/${existing.id}`, { limits: { requests_per_minute: -1 } }, 'invalid_limits', /'limits.requests_per_minute'/],
    ['PATCH', `/keys/${existing.id}`, { account: 'elsewhere' }, 'unknown_field', /'account'/],
    ['POST', `/keys/${existing.id}/rotate`, {}, 'invalid_grace_seconds', /'grace_seconds'/],
    ['POST', `/keys/${existing.id}/rotate`, { grace_seconds: -1 }, 'invalid_grace_seconds', /'grace_seconds'/],
    ['POST', `/keys/${existing.id}/rotate`, { grace_seconds: 2_592_001 }, 'invalid_grace_seconds', /'grace_seconds'/],
  ];
  for (const [method, path, body, code, message] of cases) {
    const response = await admin(method, path, body);
    const what = `${method} ${path} ${JSON.stringify(body)}`;
    t.is(response.status, 400, what);
    const { error } = (await response.json()) as { error: { code: string; message: string; type: string } };
    t.is(error.code, code, what);
    t.is(error.type, 'invalid_request_error');
    t.regex(error.message, message, what);
  }
  const keys = (await (await admin('GET', '/keys?account=validation')).json()) as { data: KeyBody[] };
  t.is(keys.data.length, 1);
  t.like(keys.data[0], { scopes: ['models:read'], models: null, limits: null, expires_at: null });
});

test("a key's MCP grant: none by default, set on creation, replaced by PATCH, [] removes it; a glob of another form is 400", async (t) => {
  t.deepEqual((await createKey({ account: 'mcp' })).mcp_tools, []);
  const { id, mcp_tools: granted } = await createKey({ account: 'mcp', mcp_tools: ['github/*', 'search/web_search', 'github/*'] });
  t.deepEqual(granted, ['github/*', 'search/web_search']);
  t.like(await (await admin('PATCH', `/keys/${id}`, { mcp_tools: ['crm/*'] })).json(), { mcp_tools: ['crm/*'] });
  t.like(await (await admin('PATCH', `/keys/${id}`, { mcp_tools: [] })).json(), { mcp_tools: [] });
  for (const mcpTools of [['github'], ['a/b/c'], 'github/*', [1]]) {
    const refused = await admin('PATCH', `/keys/${id}`, { mcp_tools: mcpTools });
    t.is(refused.status, 400);
    t.like(await refused.json(), { error: { code: 'invalid_mcp_tools' } });
  }
});

test('PATCH changes scopes, models, limits and expiry; the key obeys at once, and null clears', async (t) => {
  const { id, key } = await createKey({ account: 'patched' });
  t.deepEqual((await models(key)).ids, ['echo-1', 'echo-2', 'echo-embed-1']);
  const expiresAt = Math.floor(Date.now() / 1000) + 86_400;
  const patched = await admin('PATCH', `/keys/${id}`, { models: ['echo-2'], limits: { requests_per_minute: 30 }, expires_at: expiresAt });
  t.is(patched.status, 200);
  t.like(await patched.json(), {
    id,
    models: ['echo-2'],
    limits: { requests_per_minute: 30, tokens_per_minute: null, tokens_per_day: null },
    expires_at: expiresAt,
  });
  t.deepEqual((await models(key)).ids, ['echo-2']);
  await admin('PATCH', `/keys/${id}`, { scopes: ['files:read'] });
  t.is((await models(key)).status, 403);
  const cleared = await admin('PATCH', `/keys/${id}`, { scopes: ['models:read'], models: null, limits: null, expires_at: null });
  t.like(await cleared.json(), { models: null, limits: null, expires_at: null });
  t.deepEqual((await models(key)).ids, ['echo-1', 'echo-2', 'echo-embed-1']);
  t.is((await admin('PATCH', '/keys/key_doesnotexist', { scopes: ['models:read'] })).status, 404);
});

test('a key with cache answers repeats from the cache, per key when it asks; DELETE /cache purges one account, or all, and is audited', async (t) => {
  const perKey = await createKey({ account: 'cached', cache: { ttl_seconds: 600, per_key: true } });
  t.deepEqual(perKey.cache, { ttl_seconds: 600, per_key: true });
  const shared = await createKey({ account: 'cached', cache: { ttl_seconds: 600 } });
  const other = await createKey({ account: 'cached-elsewhere', cache: { ttl_seconds: 600 } });
  const ask = (key: string) =>
    call(
      'POST',
      '/v1/chat/completions',
      { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      { model: 'echo-1', messages: [{ role: 'user', content: 'purge me' }] },
    );
  const outcome = async (key: string) => (await ask(key)).headers.get('x-kmg-cache');
  t.is(await outcome(perKey.key), 'miss');
  t.is(await outcome(perKey.key), 'hit');
  // The per-key entries are the key's alone; the shared key's are its account's.
  t.is(await outcome(shared.key), 'miss');
  t.is(await outcome(other.key), 'miss');
  t.is((await admin('DELETE', '/cache?account=cached')).status, 204);
  t.is(await outcome(perKey.key), 'miss');
  t.is(await outcome(shared.key), 'miss');
  t.is(await outcome(other.key), 'hit');
  t.is((await admin('DELETE', '/cache')).status, 204);
  t.is(await outcome(other.key), 'miss');
  t.is((await admin('DELETE', '/cache?account=')).status, 400);
  const audited = await until(
    async () => ((await (await admin('GET', '/audit?action=cache.purged')).json()) as { data: Array<{ account: string | null }> }).data,
    (entries) => entries.length >= 2,
  );
  t.deepEqual(
    audited.slice(0, 2).map((entry) => entry.account),
    [null, 'cached'],
  );
  const patched = await admin('PATCH', `/keys/${shared.id}`, { cache: null });
  t.like(await patched.json(), { cache: null });
  t.is(await outcome(shared.key), 'bypass');
});

test('revoke: the key is refused at once; revoking again keeps the first time; an unknown id is 404', async (t) => {
  const { id, key } = await createKey({ account: 'revoked' });
  const revoked = await admin('POST', `/keys/${id}/revoke`);
  t.is(revoked.status, 200);
  const body = (await revoked.json()) as KeyBody;
  t.is(body.status, 'revoked');
  t.is(typeof body.revoked_at, 'number');
  t.is((await models(key)).status, 401);
  t.is(((await (await admin('POST', `/keys/${id}/revoke`)).json()) as KeyBody).revoked_at, body.revoked_at);
  const unknown = await admin('POST', '/keys/key_doesnotexist/revoke');
  t.is(unknown.status, 404);
  t.is(((await unknown.json()) as { error: { code: string } }).error.code, 'key_not_found');
  t.is((await admin('GET', '/keys/key_doesnotexist')).status, 404);
});

test("account names follow the file names' rule: control and format characters, lone surrogates, bytes that are not UTF-8, . and .. are 400; one name typed composed or decomposed is one account", async (t) => {
  const refused: Array<[string, unknown]> = [
    ['U+202E', { account: 'acme\u202Efdp.exe' }],
    ['U+200B', { account: 'ac\u200Bme' }],
    ['a newline inside', { account: 'ac\nme' }],
    ['a lone surrogate', { account: 'a\ud800b' }],
    ['U+FFFD', { account: 'a\uFFFDb' }],
    ['256 characters', { account: 'é'.repeat(256) }],
    // No URL path can carry them: a browser resolves /accounts/.. (and /accounts/%2E%2E) as /.
    ['.', { account: '.' }],
    ['..', { account: ' .. ' }],
  ];
  for (const [what, body] of refused) {
    const response = await admin('POST', '/keys', body);
    t.is(response.status, 400, what);
    t.like(await response.json(), { error: { type: 'invalid_request_error', code: 'invalid_account', param: null } }, what);
  }
  // Bytes that are not UTF-8: decoded, they would become U+FFFD, and two such names one account.
  const notUtf8 = Buffer.concat([Buffer.from('{"account":"a'), Buffer.from([0xff, 0xfe]), Buffer.from('b"}')]);
  const response = await fetch(`${app.url}/admin/v1/keys`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` }, body: notUtf8 });
  t.is(response.status, 400);
  t.like(await response.json(), { error: { code: 'invalid_account' } });
  for (const [what, query] of [
    ['a lone surrogate', '%ED%A0%80'],
    ['U+202E', '%E2%80%AE'],
  ]) {
    t.is((await admin('GET', `/keys?account=a${query}`)).status, 400, what);
  }
  t.is((await admin('GET', '/accounts/a%E2%80%AE')).status, 400);

  const decomposed = 'Cafe\u0301-names';
  const composed = 'Caf\u00e9-names';
  const created = await createKey({ account: decomposed });
  t.is(created.account, composed, 'kept in NFC');
  t.is((await createKey({ account: ` ${composed} ` })).account, composed, 'trimmed');
  const listed = (await (await admin('GET', `/keys?account=${encodeURIComponent(decomposed)}`)).json()) as { data: KeyBody[] };
  t.is(listed.data.length, 2, 'either spelling finds the keys');
  t.like(await (await admin('GET', `/accounts/${encodeURIComponent(decomposed)}`)).json(), { account: composed });
  t.is((await createKey({ account: '\u{1F600}'.repeat(255) })).account, '\u{1F600}'.repeat(255), '255 characters, not UTF-16 units');
});

test('GET /keys?account= lists that account only, in creation order; without it, every key', async (t) => {
  const first = await createKey({ account: 'listed' });
  await createKey({ account: 'listed-other' });
  const second = await createKey({ account: 'listed' });
  const listed = (await (await admin('GET', '/keys?account=listed')).json()) as { object: string; data: KeyBody[] };
  t.is(listed.object, 'list');
  t.deepEqual(
    listed.data.map((key) => key.id),
    [first.id, second.id],
  );
  const all = (await (await admin('GET', '/keys')).json()) as { data: KeyBody[] };
  t.true(['listed', 'listed-other'].every((account) => all.data.some((key) => key.account === account)));
});

test('GET /accounts/{account}: files and bytes kept and created today, beside the limits', async (t) => {
  const account = 'figures/with space';
  const { key } = await createKey({ account });
  let total = 0;
  for (const pages of [1, 3]) {
    const pdf = makePdf(pages);
    total += pdf.length;
    const uploaded = await fetch(`${app.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: uploadForm(pdf, 'a.pdf') });
    t.is(uploaded.status, 200);
  }
  const response = await admin('GET', `/accounts/${encodeURIComponent(account)}`);
  t.is(response.status, 200);
  t.deepEqual(await response.json(), {
    object: 'account',
    account,
    files: 2,
    bytes: total,
    creations_today: 2,
    bytes_today: total,
    limits: {
      max_files: 1000,
      max_stored_bytes: 100_000_000,
      max_file_bytes: 26_214_400,
      creates_per_minute: 10,
      creates_per_day: 1000,
      bytes_per_day: 1_073_741_824,
    },
  });
  t.like(await (await admin('GET', '/accounts/nobody-yet')).json(), { files: 0, bytes: 0, creations_today: 0, bytes_today: 0 });
});

test('every change is logged with the admin token id and the request id', async (t) => {
  const created = await admin('POST', '/keys', { account: 'logged' });
  const { id } = (await created.json()) as KeyBody;
  const requestId = created.headers.get('x-request-id');
  await admin('PATCH', `/keys/${id}`, { scopes: ['models:read'] });
  await admin('POST', `/keys/${id}/rotate`, { grace_seconds: 0 });
  const line = await app.logLine((entry) => entry.msg === 'admin change' && entry.requestId === requestId);
  t.like(line, { action: 'key.created', keyId: id, account: 'logged', adminTokenId: adminRecord.id });
  t.like(await app.logLine((entry) => entry.msg === 'admin change' && entry.action === 'key.updated' && entry.keyId === id), {
    adminTokenId: adminRecord.id,
    fields: ['scopes'],
  });
  t.like(await app.logLine((entry) => entry.msg === 'admin change' && entry.action === 'key.rotated' && entry.keyId === id), {
    adminTokenId: adminRecord.id,
  });
  t.false(
    app.logs.some((entry) => JSON.stringify(entry).includes(ADMIN)),
    'never the token',
  );
});

test('GET /catalog: the scopes and models a key may be given, and the prefix of keys', async (t) => {
  t.deepEqual(await (await admin('GET', '/catalog')).json(), {
    object: 'catalog',
    scopes: [
      'chat:completions',
      'responses:create',
      'messages:create',
      'models:read',
      'files:write',
      'files:read',
      'files:delete',
      'embeddings:create',
      'mcp:call',
    ],
    models: ['echo-1', 'echo-2', 'echo-embed-1'],
    key_prefix: 'kmg',
  });
});

interface UsageFigures {
  requests: number;
  answered: number;
  refused: number;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
  cache_hits: number;
  cost_saved_usd: number;
}

interface UsageBody {
  object: string;
  by: string;
  series: string | null;
  account: string | null;
  key: string | null;
  since: number | null;
  totals: UsageFigures;
  data: Array<UsageFigures & Record<string, unknown>>;
}

const usage = async (query: string) => {
  const response = await admin('GET', `/usage?${query}`);
  if (response.status !== 200) throw new Error(`usage ${query}: ${response.status} ${await response.text()}`);
  return (await response.json()) as UsageBody;
};

/** The report of `query` once the server has written `requests` records for it (records are written in batches). */
const usageOnceRecorded = (query: string, requests: number) =>
  until(
    async () => {
      await app.deployment.usageRecorder.flush();
      return usage(query);
    },
    (body) => body.totals.requests >= requests,
  );

// The echo models are free (price 0).
// `answered`: the calls with a 2xx status; the others are `refused`.
const figures = (requests: number, input_tokens: number, output_tokens: number, answered = requests): UsageFigures => ({
  requests,
  answered,
  refused: requests - answered,
  input_tokens,
  output_tokens,
  cost_usd: 0,
  cache_hits: 0,
  cost_saved_usd: 0,
});

test('GET /usage: the figures of real model calls, by day, model and key, narrowed by account, key and since', async (t) => {
  const account = 'usage-figures';
  const [first, second, foreign] = [
    await createKey({ account }),
    await createKey({ account, models: ['echo-2'] }),
    await createKey({ account: 'usage-elsewhere' }),
  ];
  const chat = async (key: string, model: string, content: string) => {
    const response = await call('POST', '/v1/chat/completions', { authorization: `Bearer ${key}` }, { model, messages: [{ role: 'user', content }] });
    if (response.status !== 200) return figures(1, 0, 0, 0);
    const { usage } = (await response.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    return figures(1, usage.prompt_tokens, usage.completion_tokens);
  };
  const message = async (key: string, model: string, content: string) => {
    const headers = { 'x-api-key': key, 'anthropic-version': '2023-06-01' };
    const response = await call('POST', '/v1/messages', headers, { model, max_tokens: 64, messages: [{ role: 'user', content }] });
    const { usage } = (await response.json()) as { usage: { input_tokens: number; output_tokens: number } };
    return figures(1, usage.input_tokens, usage.output_tokens);
  };
  const sum = (...all: UsageFigures[]) =>
    all.reduce((a, b) => figures(a.requests + b.requests, a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens, a.answered + b.answered));
  const firstEcho1 = await chat(first.key, 'echo-1', 'one two three');
  const firstEcho2 = await chat(first.key, 'echo-2', 'four five');
  const secondEcho2 = await message(second.key, 'echo-2', 'six seven eight nine');
  const refused = await chat(second.key, 'echo-1', 'outside the allowlist: 403, before any model is resolved');
  const elsewhere = await chat(foreign.key, 'echo-1', 'ten');
  t.true(firstEcho1.input_tokens > 0 && secondEcho2.output_tokens > 0, 'the echo provider reports usage');
  t.deepEqual(refused, figures(1, 0, 0, 0));

  const byModel = await usageOnceRecorded(`account=${account}&by=model`, 4);
  t.deepEqual(byModel, {
    object: 'usage',
    by: 'model',
    series: null,
    account,
    key: null,
    since: null,
    totals: sum(firstEcho1, firstEcho2, secondEcho2, refused),
    data: [
      { model: 'echo-1', ...firstEcho1 },
      { model: 'echo-2', ...sum(firstEcho2, secondEcho2) },
      { model: null, ...refused },
    ],
  });
  const [low, high] = [first, second].sort((a, b) => (a.id < b.id ? -1 : 1)) as [KeyBody, KeyBody];
  const perKey = new Map([
    [first.id, sum(firstEcho1, firstEcho2)],
    [second.id, sum(secondEcho2, refused)],
  ]);
  t.deepEqual((await usage(`account=${account}&by=key`)).data, [
    { key: low.id, ...perKey.get(low.id) },
    { key: high.id, ...perKey.get(high.id) },
  ]);

  const [day] = new Set((await app.deployment.usageStore.list({ account })).map((record) => new Date(record.time).toISOString().slice(0, 10)));
  const byDay = await usage(`account=${account}&series=model`);
  t.like(byDay, { by: 'day', series: 'model', totals: byModel.totals });
  t.deepEqual(byDay.data, [{ day, ...byModel.totals, series: byModel.data }]);
  t.deepEqual((await usage(`account=${account}&by=model&series=key`)).data[1], {
    model: 'echo-2',
    ...sum(firstEcho2, secondEcho2),
    series: [
      { key: first.id, ...firstEcho2 },
      { key: second.id, ...secondEcho2 },
    ].sort((a, b) => (a.key < b.key ? -1 : 1)),
  });

  const keyOnly = await usage(`key=${second.id}`);
  t.like(keyOnly, { key: second.id, account: null, totals: sum(secondEcho2, refused) });
  const foreignKey = await usage(`account=${account}&key=${foreign.id}`);
  t.deepEqual([foreignKey.totals, foreignKey.data], [figures(0, 0, 0), []], "a key of another account adds nothing to this one's figures");
  t.deepEqual((await usageOnceRecorded(`key=${foreign.id}`, 1)).totals, elsewhere);

  const now = Math.floor(Date.now() / 1000);
  const future = await usage(`account=${account}&since=${now + 3600}`);
  t.deepEqual([future.since, future.totals, future.data], [now + 3600, figures(0, 0, 0), []]);
  t.like(await usage(`account=${account}&since=${day}`), { since: Date.parse(`${day}T00:00:00Z`) / 1000, totals: byModel.totals });
  t.like(await usage(`account=${account}&since=0`), { since: 0, totals: byModel.totals });
});

test('GET /usage: every parameter is validated, 400 naming it; ISO 8601 dates and times are read as Unix seconds', async (t) => {
  const cases: Array<[string, string, RegExp]> = [
    ['by=month', 'invalid_by', /'by': must be one of day, model, key/],
    ['by=', 'invalid_by', /'by'/],
    ['by=day&by=model', 'invalid_by', /'by'/],
    ['series=hour', 'invalid_series', /'series'/],
    ['series=day', 'invalid_series', /'series'.*other than 'by'/],
    ['by=model&series=model', 'invalid_series', /'series'/],
    ['since=yesterday', 'invalid_since', /'since': must be Unix seconds/],
    ['since=', 'invalid_since', /'since'/],
    ['since=-1', 'invalid_since', /'since'/],
    ['since=1.5', 'invalid_since', /'since'/],
    ['since=253402300800', 'invalid_since', /'since'/],
    ['since=2030-02-30', 'invalid_since', /'since'/],
    ['since=2030-01-01T00:00:00', 'invalid_since', /'since'/],
    ['since=2030-01-01T00:00:00.250Z', 'invalid_since', /'since'/],
    ['account=', 'invalid_account', /'account'/],
    ['account=%20%20', 'invalid_account', /'account'/],
    ['account=a&account=b', 'invalid_account', /'account'/],
    ['account=a%07b', 'invalid_account', /'account'/],
    ['key=', 'invalid_key', /'key'/],
    ['key=..%2Fkey_a', 'invalid_key', /'key'/],
    [`key=${'k'.repeat(65)}`, 'invalid_key', /'key'/],
    ['limit=10', 'unknown_field', /'limit'/],
  ];
  for (const [query, code, message] of cases) {
    const response = await admin('GET', `/usage?${query}`);
    t.is(response.status, 400, query);
    t.regex(response.headers.get('x-request-id') ?? '', REQUEST_ID);
    const { error } = (await response.json()) as { error: { code: string; message: string; type: string; param: null } };
    t.like(error, { code, type: 'invalid_request_error', param: null }, query);
    t.regex(error.message, message, query);
  }
  for (const [since, seconds] of [
    ['1893456000', 1_893_456_000],
    ['2030-01-01', 1_893_456_000],
    ['2030-01-01T12:00:00Z', 1_893_499_200],
    ['2030-01-01T12:00:00%2B02:00', 1_893_492_000],
  ] as const) {
    t.is((await usage(`since=${since}`)).since, seconds, since);
  }
});

// The list of every account on both deployments: each account with a key, its active keys, its
// files and this UTC month's calls. Keys an operator can tell apart, on both deployments: a name,
// the secret's hint, the links of a rotation, the last use, and the list found by a prefix.

/** A reference server of its own on `env`'s deployment, and a call to its admin API with an admin token. */
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
  return { server, admin, token };
}

function callRecord(keyId: string, account: string, time: number, tokens: [number, number], costPicoUsd = 0): UsageRecord {
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
    costPicoUsd,
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
  gated(`${name}: GET /accounts lists every account with a key: active keys, files kept, and only this UTC month's calls and their cost`, async (t) => {
    const { env, drop } = await database();
    t.teardown(drop);
    const { server, admin } = await openServer(t, env);
    t.deepEqual((await admin('GET', '/accounts')).body, { object: 'list', data: [] });

    const first = await admin('POST', '/keys', { account: 'zeta' });
    const second = await admin('POST', '/keys', { account: 'zeta' });
    const revoked = await admin('POST', '/keys', { account: 'acme <b>' });
    t.is((await admin('POST', `/keys/${revoked.body.id}/revoke`)).status, 200);
    const pdf = makePdf(1);
    const uploaded = await fetch(`${server.url}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${first.body.key}` },
      body: uploadForm(pdf, 'a.pdf'),
    });
    t.is(uploaded.status, 200);
    await uploaded.arrayBuffer();
    const now = new Date();
    const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
    await server.deployment.usageStore.insert([
      callRecord(first.body.id, 'zeta', monthStart, [10, 20], 1_250_000_000_000),
      callRecord(second.body.id, 'zeta', monthStart + 1000, [1, 2], 500_000_000_000),
      callRecord(first.body.id, 'zeta', monthStart - 1, [500, 500], 9_000_000_000_000), // last month: not counted
      callRecord(revoked.body.id, 'acme <b>', monthStart + 5, [7, 0]),
    ]);

    const listed = await admin('GET', '/accounts');
    t.is(listed.status, 200);
    t.deepEqual(listed.body.data, [
      {
        object: 'account_summary',
        account: 'acme <b>',
        keys: 0,
        files: 0,
        bytes: 0,
        requests_this_month: 1,
        input_tokens_this_month: 7,
        output_tokens_this_month: 0,
        cost_usd_this_month: 0,
      },
      {
        object: 'account_summary',
        account: 'zeta',
        keys: 2,
        files: 1,
        bytes: pdf.length,
        requests_this_month: 2,
        input_tokens_this_month: 11,
        output_tokens_this_month: 22,
        cost_usd_this_month: 1.75,
      },
    ]);
  });

  gated(
    `${name}: GET /requests lists the calls newest first, filtered, a page at a time by keyset, and /requests/export streams them as CSV or JSON Lines; a bad parameter is a 400 naming it`,
    async (t) => {
      const { env, drop } = await database();
      t.teardown(drop);
      const { server, admin, token } = await openServer(t, env);
      const { body: key } = await admin('POST', '/keys', { account: 'acme' });
      // One call through the gateway, metered as any is.
      const answered = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] }),
      });
      t.is(answered.status, 200);
      const requestId = answered.headers.get('x-request-id');
      await answered.arrayBuffer();
      // Before the call: whole seconds, an hour ago.
      const base = Math.floor(Date.now() / 1000) * 1000 - 3_600_000;
      const older = Array.from({ length: 5 }, (_, i) => ({
        ...callRecord(key.id, 'acme', base + Math.floor(i / 2) * 1000, [i, 1]),
        requestId: `req_older_${i}`,
        status: i === 3 ? 429 : 200,
      }));
      await server.deployment.usageStore.insert([...older, callRecord('key_other', 'globex', base, [1, 1])]);
      const list = async (query: string) =>
        (await admin('GET', `/requests${query}`)) as unknown as {
          status: number;
          body: { data: Array<Record<string, unknown>>; has_more: boolean; next_cursor: string | null };
        };

      await server.idle();
      await server.deployment.usageRecorder.flush();
      const newest = await list('?account=acme&limit=1');
      t.is(newest.body.data[0]?.request_id, requestId);
      t.like(newest.body.data[0], {
        object: 'request',
        account: 'acme',
        key_id: key.id,
        model: 'echo-1',
        deployment: 'echo',
        status: 200,
        attempts: 1,
        endpoint: '/v1/chat/completions',
      });
      t.true(newest.body.has_more);
      const ids: unknown[] = [];
      for (let cursor: string | null = newest.body.next_cursor; cursor !== null; ) {
        const page = await list(`?account=acme&limit=2&cursor=${cursor}`);
        ids.push(...page.body.data.map((call) => call.request_id));
        cursor = page.body.next_cursor;
      }
      t.deepEqual(ids, ['req_older_4', 'req_older_3', 'req_older_2', 'req_older_1', 'req_older_0']);
      t.deepEqual(
        (await list('?status=429')).body.data.map((call) => call.request_id),
        ['req_older_3'],
      );
      const inASecond = (await list(`?key=${key.id}&model=test-model&since=${base / 1000 + 1}&until=${base / 1000 + 2}`)).body.data;
      t.deepEqual(
        inASecond.map((call) => [call.request_id, call.time, call.cost_usd]),
        [
          ['req_older_3', base / 1000 + 1, 0],
          ['req_older_2', base / 1000 + 1, 0],
        ],
      );
      // The same records, exported: CSV with a header, or JSON Lines, every record of the period.
      const exported = async (query: string) => {
        const response = await checked(`${server.url}/admin/v1/requests/export?${query}`, { headers: { authorization: `Bearer ${token}` } });
        return { status: response.status, type: response.headers.get('content-type'), text: await response.text() };
      };
      const csv = await exported(`since=${base / 1000}&until=${base / 1000 + 2}&account=acme&format=csv`);
      t.is(csv.type, 'text/csv; charset=utf-8');
      const [header, ...rows] = csv.text.trimEnd().split('\n');
      t.is(
        header,
        'request_id,time,account,key_id,endpoint,model,deployment,upstream_model,status,stream,attempts,input_tokens,output_tokens,cost_usd,latency_ms,upstream_first_byte_ms,upstream_ms,trace_id,cache,cost_saved_usd',
      );
      t.deepEqual(
        rows.map((row) => row.split(',').slice(0, 2)),
        [3, 2, 1, 0].map((i) => [`req_older_${i}`, new Date(base + Math.floor(i / 2) * 1000).toISOString()]),
      );
      const jsonl = await exported(`since=${base / 1000}&format=jsonl&status=429`);
      t.deepEqual(
        jsonl.text
          .trimEnd()
          .split('\n')
          .map((line) => (JSON.parse(line) as { request_id: string }).request_id),
        ['req_older_3'],
      );
      // Or their daily roll-ups: one row per day, account, key, model, endpoint and status.
      const daily = await exported(`since=${base / 1000 - 86_400}&account=acme&rollups=day&format=jsonl`);
      const rollups = daily.text
        .trimEnd()
        .split('\n')
        .map((row) => JSON.parse(row) as { status: number; requests: number; model: string });
      t.is(
        rollups.reduce((sum, row) => sum + row.requests, 0),
        6,
        'the call and the five records',
      );
      t.deepEqual(
        rollups.filter((row) => row.status === 429).map((row) => [row.model, row.requests]),
        [['test-model', 1]],
      );
      t.is((await exported(`since=${base / 1000}&rollups=day&status=429&format=csv`)).status, 400, 'the roll-ups know no status filter');
      t.is((await exported('format=csv')).status, 400, 'a period starts somewhere');
      t.is((await exported(`since=${base / 1000}&format=xml`)).status, 400);
      for (const bad of ['limit=0', 'limit=101', 'status=99', 'status=600', 'cursor=abc', 'until=soon', 'model=', 'colour=red', 'status=200&status=429']) {
        const refused = await list(`?${bad}`);
        t.is(refused.status, 400, bad);
        t.regex(JSON.stringify(refused.body), new RegExp(bad.split('=')[0] as string), bad);
      }
    },
  );

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
    t.like(
      (await admin('GET', '/keys')).body.data.find((key) => key.id === created.id),
      { last_used_at: used },
    );
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
  const memoryApp = await adminApp();
  t.teardown(() => memoryApp.close());
  await memoryApp.admin('POST', '/keys', { account: 'acme' });
  const expiring = await memoryApp.admin('POST', '/keys', { account: 'acme', expires_at: memoryApp.clock.seconds + 60 });
  t.is(expiring.status, 201);
  await expiring.arrayBuffer();
  memoryApp.clock.seconds += 60;
  const listed = await memoryApp.admin('GET', '/accounts');
  t.deepEqual(((await listed.json()) as { data: unknown[] }).data, [
    {
      object: 'account_summary',
      account: 'acme',
      keys: 1,
      files: 0,
      bytes: 0,
      requests_this_month: null,
      input_tokens_this_month: null,
      output_tokens_this_month: null,
      cost_usd_this_month: null,
    },
  ]);
  t.deepEqual(memoryApp.problems, []);
});

// A key's budgets, on the admin API composed from lib/ in memory: set at creation, changed and
// removed by PATCH, refused when they are not a positive number.
test('a key is created with budgets in USD, PATCH changes or removes them, a bad one is 400 naming it', async (t) => {
  const memoryApp = await adminApp();
  t.teardown(() => memoryApp.close());
  const created = await memoryApp.admin('POST', '/keys', { account: 'acme', limits: { cost_per_day: 5, cost_per_month: 49.95 } });
  t.is(created.status, 201);
  const key = (await created.json()) as KeyBody;
  t.deepEqual(key.limits, {
    requests_per_minute: null,
    tokens_per_minute: null,
    tokens_per_day: null,
    cost_per_day: 5,
    cost_per_month: 49.95,
    cost_soft: null,
    cost_alert_thresholds: null,
  });
  t.like((await memoryApp.keys.get(key.id))?.limits, { costPerDay: 5, costPerMonth: 49.95 });

  // Limits are replaced whole: what is left out is the default again.
  const patched = (await (await memoryApp.admin('PATCH', `/keys/${key.id}`, { limits: { cost_per_month: 50, tokens_per_day: 1000 } })).json()) as KeyBody;
  t.deepEqual(patched.limits, {
    requests_per_minute: null,
    tokens_per_minute: null,
    tokens_per_day: 1000,
    cost_per_day: null,
    cost_per_month: 50,
    cost_soft: null,
    cost_alert_thresholds: null,
  });

  for (const bad of [0, -1, '5', 1e16, 1e-13]) {
    const refused = await memoryApp.admin('PATCH', `/keys/${key.id}`, { limits: { cost_per_day: bad } });
    t.is(refused.status, 400, String(bad));
    t.like(await refused.json(), {
      error: {
        code: 'invalid_limits',
        message: "Invalid 'limits.cost_per_day': must be a positive number of USD, from 1e-12 (one picodollar) to 1e15, or null",
      },
    });
  }
  t.like((await memoryApp.keys.get(key.id))?.limits, { costPerMonth: 50 });
  t.deepEqual(memoryApp.problems, []);
});

test('the admin factories refuse a configuration they cannot serve, when they are made', (t) => {
  const keys = new MemoryKeyStore();
  const files = new MemoryFileStore();
  t.throws(() => adminAuth({} as never), { instanceOf: TypeError, message: /AdminTokenStore/ });
  t.throws(() => adminRouter({ files, catalog: [] } as never), { instanceOf: TypeError, message: /KeyStore/ });
  t.throws(() => adminRouter({ keys, catalog: [] } as never), { instanceOf: TypeError, message: /FileStore/ });
  t.throws(() => adminRouter({ keys, files } as never), { instanceOf: TypeError, message: /catalog/ });
  t.throws(() => adminRouter({ keys, files, catalog: [], keyPrefix: 'kmg_' }), { instanceOf: TypeError, message: /prefix/ });
  t.throws(() => adminRouter({ keys, files, catalog: [], usageStore: {} as never }), { instanceOf: TypeError, message: /UsageStore/ });
  t.throws(() => adminSessions({} as never), { instanceOf: TypeError, message: /AdminSessionStore/ });
  t.throws(() => adminSessions({ sessions: new MemoryAdminSessionStore(), ttlSeconds: 0 }), { instanceOf: TypeError, message: /ttlSeconds/ });
});

test('createAdminToken() takes a name only as canonicalAdminTokenName() makes it: printable, trimmed, NFC, 255 characters at most', async (t) => {
  for (const name of ['esc\u001b[31m', 'line\nbreak', ' padded ', 'x'.repeat(256), '']) {
    await t.throwsAsync(createAdminToken(tokens, { prefix, name }), {
      instanceOf: TypeError,
      message: /admin token name must be 1 to 255 printable characters/,
    });
  }
  t.is(canonicalAdminTokenName(' ops laptop '), 'ops laptop');
  t.is((await createAdminToken(tokens, { prefix, name: 'x'.repeat(255) })).record.name, 'x'.repeat(255));
});

test('adminRouter() serves GET /usage only when it is given a usage store', (t) => {
  const routes = (router: ReturnType<typeof adminRouter>) => router.stack.map((layer) => String(layer.path));
  const options = { keys: new MemoryKeyStore(), files: new MemoryFileStore(), catalog: [] };
  t.false(routes(adminRouter(options)).includes('/admin/v1/usage'));
  t.true(routes(adminRouter({ ...options, usageStore: new MemoryUsageStore() })).includes('/admin/v1/usage'));
});

// Admin changes with Redis stalled (SIGSTOP: the connection stays open, nothing answers): the
// change is made in the database and answered; its announcement gives up after the limiters'
// timeout (500 ms), and the other processes see the change when their key cache expires.

/** A long stall, ended by the test's teardown: an admin change that waited for Redis would answer only then. */
const STALL_MS = 20_000;

withRedisServer('revoke, PATCH and rotate answer while Redis stalls: the database write commits, the announcement gives up', async (t) => {
  const redis = await ownRedis();
  t.teardown(() => redis.kill());
  const stalledApp = await referenceApp(undefined, { REDIS_URL: redis.url });
  t.teardown(() => stalledApp.close());
  const { token } = await createAdminToken(stalledApp.deployment.adminTokens, { prefix: stalledApp.config.gateway.keyPrefix });
  const admin = (method: string, path: string, body?: unknown) =>
    fetch(`${stalledApp.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${token}` },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const keyFor = async () => (await (await admin('POST', '/keys', { account: 'stalled' })).json()) as { id: string; key: string };
  const [revoked, patched, rotated] = [await keyFor(), await keyFor(), await keyFor()];

  redis.pause();
  let stallEnded = false;
  const ending = setTimeout(() => {
    stallEnded = true;
    redis.resume();
  }, STALL_MS);
  t.teardown(() => {
    clearTimeout(ending);
    redis.resume();
  });

  t.is((await admin('POST', `/keys/${revoked.id}/revoke`)).status, 200);
  t.is((await admin('PATCH', `/keys/${patched.id}`, { scopes: ['models:read'] })).status, 200);
  const rotation = await admin('POST', `/keys/${rotated.id}/rotate`, { grace_seconds: 0 });
  t.is(rotation.status, 201);
  const replacement = (await rotation.json()) as { key: string };
  t.false(stallEnded, 'every change answered while Redis was still stalled');

  // Made in the database, as every process reads it.
  const store = stalledApp.deployment.keys;
  t.is(typeof (await store.get(revoked.id))?.revokedAt, 'number');
  t.deepEqual((await store.get(patched.id))?.scopes, ['models:read']);
  t.like(await store.findByHash((await store.list({ account: 'stalled' })).at(-1)?.hash ?? ''), { account: 'stalled', revokedAt: null });
  t.truthy(replacement.key);
  // In this process, at once; the operator is told that the others see it within keyCacheSeconds.
  const models = async (key: string) => (await fetch(`${stalledApp.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status;
  t.is(await models(revoked.key), 401);
  t.is(await models(rotated.key), 401);
  const warnings = stalledApp.logs.filter((line) => line.msg.startsWith('key change made but not announced'));
  t.deepEqual(warnings.map((line) => line.keyId).sort(), [revoked.id, patched.id, rotated.id].sort());
});

withRedisServer(
  'keys revoke on the command line, Redis stalled: the revocation stands, one warning line says when the servers refuse the key, exit 0',
  async (t) => {
    const redis = await ownRedis();
    t.teardown(() => redis.kill());
    const data = await tempDataDir();
    t.teardown(() => data.remove());
    const env = { DATA_DIR: join(data.dir, 'data'), REDIS_URL: redis.url };
    const io = (lines: string[]) => ({ env, out: (text: string) => lines.push(text), err: (text: string) => lines.push(text) });
    const created: string[] = [];
    t.is(await runCommand(['keys', 'create', '--account', 'stalled', '--json'], io(created)), 0);
    const { id } = JSON.parse(created[0] ?? '') as { id: string };

    redis.pause();
    t.teardown(() => redis.resume());
    // In a process of its own, as an operator runs it: its whole stderr is the one warning line.
    const revoked = await spawnCli(['keys', 'revoke', id], env);
    t.is(revoked.code, 0);
    t.regex(revoked.stderr, /^koa-model-gateway: warning: revoked, but the servers were not told \(.*\): they refuse the key within 1 s\n$/);
    t.is(revoked.stdout, `Revoked ${id}\n`);
    const listed: string[] = [];
    await runCommand(['keys', 'list', '--json'], io(listed));
    t.is(typeof (JSON.parse(listed[0] ?? '') as Array<{ revoked_at: number | null }>)[0]?.revoked_at, 'number');
  },
);

for (const [name, gated, database] of deployments) {
  gated(
    `${name}: the reference server counts days and months by the deployment's clock: a call's record, an account's spend and its month's calls`,
    async (t) => {
      const { env, drop } = await database();
      t.teardown(drop);
      const now = Date.parse('2030-02-10T12:00:00Z');
      const clocked = await referenceApp(undefined, env, { nowMs: () => now });
      t.teardown(() => clocked.close());
      const { token } = await createAdminToken(clocked.deployment.adminTokens, { prefix: clocked.config.gateway.keyPrefix });
      const { record: key, key: secret } = await createApiKey(clocked.deployment.keys, {
        prefix: clocked.config.gateway.keyPrefix,
        account: 'clocked',
        scopes: ['chat:completions'],
      });
      const answered = await fetch(`${clocked.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}` },
        body: JSON.stringify({ model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] }),
      });
      t.is(answered.status, 200);
      await clocked.deployment.usageRecorder.flush();
      t.deepEqual(
        (await clocked.deployment.usageStore.list({ account: 'clocked' })).map((record) => record.time),
        [now],
      );
      const at = (time: string, costPicoUsd: number) => usageRecord({ time: Date.parse(time), account: 'clocked', keyId: key.id, costPicoUsd });
      // The clock's day, its month's first day, and the month before: 1.25, 0.5 and 4 USD.
      await clocked.deployment.usageStore.insert([
        at('2030-02-10T00:00:00Z', 1_250_000_000_000),
        at('2030-02-01T00:00:00Z', 500_000_000_000),
        at('2030-01-31T23:59:59Z', 4_000_000_000_000),
      ]);
      const get = async (path: string) => (await checked(`${clocked.url}/admin/v1${path}`, { headers: { authorization: `Bearer ${token}` } })).json();
      t.like(await get('/accounts/clocked/limits'), { spent: { day: 1.25, month: 1.75 } });
      t.like(((await get('/accounts')) as { data: unknown[] }).data[0], { account: 'clocked', requests_this_month: 3 });
    },
  );
}
