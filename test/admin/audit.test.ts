import { hash } from 'node:crypto';
import test from 'ava';
import { parse as parseCookies } from 'cookie';
import Koa from 'koa';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import type { AdminTokenRecord } from '../../lib/admin/admin-token-store.js';
import type { AuditEntry, AuditEvent, AuditStore, NewAuditEntry } from '../../lib/admin/audit-store.js';
import { auditTrail } from '../../lib/admin/audit-trail.js';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import { MemoryAdminTokenStore } from '../../lib/stores/memory/admin-token-store.js';
import { MemoryAuditStore } from '../../lib/stores/memory/audit-store.js';
import { listen } from '../helpers/http.js';
import { checkedFetch } from '../helpers/openapi.js';
import { referenceApp, type ReferenceApp } from '../helpers/reference-app.js';

// The audit log on the reference server's own app (SQLite, in this process): every admin action
// through the admin API, recorded once, after its success, with no secret in it. Serial: each test
// counts the entries its actions add (serial tests run before the others of the file). Then
// auditTrail() on its own: what it records, and that an audit store failing or stalled never
// changes the answer to a change that was made.

let app: ReferenceApp;
let ADMIN: string;
let adminRecord: AdminTokenRecord;
const memoryTokens = new MemoryAdminTokenStore();
/** The admin token of auditTrail()'s tests, in memory. */
let memoryToken: AdminTokenRecord;
/** Every secret the tests handle: none may appear in a stored row. */
const secrets: string[] = [];
test.before(async () => {
  app = await referenceApp();
  ({ token: ADMIN, record: adminRecord } = await createAdminToken(app.deployment.adminTokens, { prefix: app.config.gateway.keyPrefix, name: 'ops-team' }));
  memoryToken = await memoryTokens.create({ hash: 'a'.repeat(64), name: 'ci' });
  secrets.push(ADMIN, adminRecord.hash);
});

test.after.always(() => app?.close());
const problems: string[] = [];
test.after('every answer agrees with docs/openapi.json', (t) => t.deepEqual(problems, []));
const checked = checkedFetch(problems);
const sha256 = (text: string) => hash('sha256', text, 'hex');

interface AuditEntryBody {
  object: string;
  id: string;
  at: number;
  action: string;
  actor: { type: string; id: string | null; name: string | null };
  key_id: string | null;
  account: string | null;
  admin_token_id: string | null;
  replacement_key_id: string | null;
  user_id: string | null;
  fields: string[];
  changes: Record<string, { from: unknown; to: unknown }> | null;
  address: string | null;
}
interface AuditListBody {
  object: 'list';
  data: AuditEntryBody[];
  has_more: boolean;
  next_cursor: string | null;
}

const call = (method: string, path: string, headers: Record<string, string> = {}, body?: unknown) =>
  checked(`${app.url}/admin/v1${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
const admin = (method: string, path: string, body?: unknown) => call(method, path, { authorization: `Bearer ${ADMIN}` }, body);

async function audit(query = ''): Promise<AuditListBody> {
  const response = await admin('GET', `/audit${query}`);
  if (response.status !== 200) throw new Error(`audit: ${response.status} ${await response.text()}`);
  return (await response.json()) as AuditListBody;
}

/** Runs `action`, then answers the entries it added (newest first). */
async function added(action: () => Promise<Response>, expectStatus: number): Promise<AuditEntryBody[]> {
  const before = (await audit('?limit=1')).data[0]?.id;
  const response = await action();
  if (response.status !== expectStatus) throw new Error(`expected ${expectStatus}, got ${response.status} ${await response.text()}`);
  const { data } = await audit('?limit=100');
  const index = before === undefined ? data.length : data.findIndex((entry) => entry.id === before);
  return data.slice(0, index);
}

const byToken = () => ({ type: 'admin_token', id: adminRecord.id, name: 'ops-team' });
const LOCAL = /^(::ffff:)?127\.0\.0\.1$|^::1$/;

test.serial('each admin action records exactly one entry: who (token id and name), what, when and from where; never a secret', async (t) => {
  const startedAt = Math.floor(Date.now() / 1000);
  let key = '';
  const [created] = await added(async () => {
    const response = await admin('POST', '/keys', { account: 'audited', scopes: ['models:read'], limits: { requests_per_minute: 5 } });
    key = ((await response.clone().json()) as { key: string }).key;
    return response;
  }, 201);
  secrets.push(key, sha256(key));
  const keyId = created?.key_id ?? '';
  t.like(created, { object: 'audit_entry', action: 'key.created', actor: byToken(), account: 'audited', admin_token_id: null, replacement_key_id: null });
  t.deepEqual(created?.fields, ['account', 'scopes', 'limits']);
  t.regex(created?.address ?? '', LOCAL);
  t.true((created?.at ?? 0) >= startedAt && Number.isInteger(created?.at));

  const updated = await added(() => admin('PATCH', `/keys/${keyId}`, { scopes: ['models:read', 'files:read'], expires_at: null }), 200);
  t.is(updated.length, 1);
  t.like(updated[0], { action: 'key.updated', key_id: keyId, account: 'audited', fields: ['scopes', 'expires_at'], actor: byToken() });
  // The values before and after, of the fields that changed: expires_at was null already.
  t.like(updated[0]?.changes, { scopes: { to: ['models:read', 'files:read'] } });
  t.deepEqual(Object.keys(updated[0]?.changes ?? {}), ['scopes']);
  const renamed = await added(() => admin('PATCH', `/keys/${keyId}`, { name: 'Nightly', limits: { requests_per_minute: 60, cost_per_day: 2 } }), 200);
  t.deepEqual(renamed[0]?.changes, {
    name: { from: null, to: 'Nightly' },
    limits: {
      from: {
        requests_per_minute: 5,
        tokens_per_minute: null,
        tokens_per_day: null,
        cost_per_day: null,
        cost_per_month: null,
        cost_soft: null,
        cost_alert_thresholds: null,
      },
      to: {
        requests_per_minute: 60,
        tokens_per_minute: null,
        tokens_per_day: null,
        cost_per_day: 2,
        cost_per_month: null,
        cost_soft: null,
        cost_alert_thresholds: null,
      },
    },
  });

  let newKey = '';
  const rotated = await added(async () => {
    const response = await admin('POST', `/keys/${keyId}/rotate`, { grace_seconds: 60 });
    newKey = ((await response.clone().json()) as { key: string }).key;
    return response;
  }, 201);
  secrets.push(newKey, sha256(newKey));
  t.is(rotated.length, 1);
  const replacementId = rotated[0]?.replacement_key_id ?? '';
  t.like(rotated[0], { action: 'key.rotated', key_id: keyId, account: 'audited' });
  t.regex(replacementId, /^key_/);

  const revoked = await added(() => admin('POST', `/keys/${replacementId}/revoke`), 200);
  t.is(revoked.length, 1);
  t.like(revoked[0], { action: 'key.revoked', key_id: replacementId, account: 'audited', actor: byToken() });
  // Revoking again changes nothing: the same 200, and no second entry.
  t.deepEqual(await added(() => admin('POST', `/keys/${replacementId}/revoke`), 200), []);

  const limits = await added(() => admin('PUT', '/accounts/audited/limits', { costPerDay: 5, costPerMonth: null }), 200);
  t.is(limits.length, 1);
  t.like(limits[0], { action: 'account.limits_set', account: 'audited', key_id: null, fields: ['costPerDay', 'costPerMonth'], actor: byToken() });
  t.deepEqual(limits[0]?.changes, { costPerDay: { from: null, to: 5 } });

  // A dashboard session acts for its token: its actions are the token's.
  let cookie = '';
  let csrf = '';
  const opened = await added(async () => {
    const response = await admin('POST', '/sessions');
    cookie = parseCookies(response.headers.get('set-cookie') ?? '').kmg_admin_session ?? '';
    csrf = ((await response.clone().json()) as { csrf_token: string }).csrf_token;
    return response;
  }, 201);
  secrets.push(cookie, sha256(cookie), csrf);
  t.is(opened.length, 1);
  t.like(opened[0], { action: 'session.opened', actor: byToken(), key_id: null, account: null });
  const session = { cookie: `kmg_admin_session=${cookie}`, 'x-csrf-token': csrf };
  const viaSession = await added(() => call('POST', '/keys', session, { account: 'audited' }), 201);
  t.like(viaSession[0], { action: 'key.created', actor: byToken(), account: 'audited' });
  const closed = await added(() => call('DELETE', '/sessions/current', session), 204);
  t.like(closed[0], { action: 'session.closed', actor: byToken() });

  // No secret anywhere in the stored rows, whatever column.
  const rows = JSON.stringify(await app.deployment.knex('kmg_audit_log').select());
  for (const secret of secrets) t.false(rows.includes(secret), 'a secret is in the audit log');
  t.false(JSON.stringify(await audit('?limit=100')).includes(ADMIN));
});

test.serial('a refused or failed admin request records nothing; reads record nothing', async (t) => {
  const { data } = await audit('?limit=1');
  const created = (await (await admin('POST', '/keys', { account: 'audited-refusals' })).json()) as { id: string };
  await admin('POST', `/keys/${created.id}/revoke`);
  const counted = (await audit('?limit=100')).data.length;
  const refusals: Array<[string, string, unknown, number]> = [
    ['PATCH', '/keys/key_doesnotexist', { expires_at: null }, 404],
    ['POST', '/keys', { account: 'audited-refusals', scopes: ['no:such'] }, 400],
    ['POST', `/keys/${created.id}/rotate`, { grace_seconds: 0 }, 409],
    ['POST', '/keys/key_doesnotexist/revoke', undefined, 404],
    ['PUT', '/accounts/audited-refusals/limits', { costPerDay: -1 }, 400],
    ['PUT', '/accounts/audited-refusals/limits', { costPerDay: 1e-13 }, 400],
    ['GET', '/keys', undefined, 200],
    ['GET', `/keys/${created.id}`, undefined, 200],
  ];
  for (const [method, path, body, status] of refusals) t.is((await admin(method, path, body)).status, status, `${method} ${path}`);
  t.is((await call('POST', '/keys', { authorization: 'Bearer nope' }, { account: 'audited-refusals' })).status, 401);
  t.is((await audit('?limit=100')).data.length, counted);
  t.not(data[0]?.id, (await audit('?limit=1')).data[0]?.id, 'the create and revoke before were recorded');
});

test.serial(
  'soft budgets and alert thresholds are set through the admin API on a key and an account, answered, audited with their values; bad ones are 400 naming the field',
  async (t) => {
    const [created] = await added(
      () => admin('POST', '/keys', { account: 'audited-soft', limits: { cost_per_day: 3, cost_soft: true, cost_alert_thresholds: [90, 25, 90] } }),
      201,
    );
    const keyId = created?.key_id ?? '';
    t.like(await (await admin('GET', `/keys/${keyId}`)).json(), { limits: { cost_per_day: 3, cost_soft: true, cost_alert_thresholds: [25, 90] } });
    t.like((await app.deployment.keys.get(keyId))?.limits, { costPerDay: 3, costSoft: true, costAlertThresholds: [25, 90] });
    const [patched] = await added(() => admin('PATCH', `/keys/${keyId}`, { limits: { cost_per_day: 3, cost_soft: false } }), 200);
    t.like(patched?.changes?.limits, { from: { cost_soft: true, cost_alert_thresholds: [25, 90] }, to: { cost_soft: false, cost_alert_thresholds: null } });

    const [set] = await added(() => admin('PUT', '/accounts/audited-soft/limits', { costPerMonth: 20, costSoft: true, costAlertThresholds: [75] }), 200);
    t.deepEqual(set?.changes, { costPerMonth: { from: null, to: 20 }, costSoft: { from: false, to: true }, costAlertThresholds: { from: null, to: [75] } });
    t.like(await (await admin('GET', '/accounts/audited-soft/limits')).json(), { costPerMonth: 20, costSoft: true, costAlertThresholds: [75] });
    const [unset] = await added(() => admin('PUT', '/accounts/audited-soft/limits', { costSoft: null, costAlertThresholds: null }), 200);
    t.deepEqual(unset?.changes, { costSoft: { from: true, to: false }, costAlertThresholds: { from: [75], to: null } });

    const rule = 'must be 1 to 10 whole percents of the budget, each from 1 to 1000, or null';
    for (const [method, path, body, code, message] of [
      ['PATCH', `/keys/${keyId}`, { limits: { cost_soft: 'yes' } }, 'invalid_limits', "Invalid 'limits.cost_soft': must be true or false, or null"],
      ['PATCH', `/keys/${keyId}`, { limits: { cost_alert_thresholds: [0] } }, 'invalid_limits', `Invalid 'limits.cost_alert_thresholds.0': ${rule}`],
      ['PATCH', `/keys/${keyId}`, { limits: { cost_alert_thresholds: [] } }, 'invalid_limits', `Invalid 'limits.cost_alert_thresholds': ${rule}`],
      ['PUT', '/accounts/audited-soft/limits', { costSoft: 1 }, 'invalid_costSoft', "Invalid 'costSoft': must be true or false, or null"],
      ['PUT', '/accounts/audited-soft/limits', { costAlertThresholds: [50.5] }, 'invalid_costAlertThresholds', `Invalid 'costAlertThresholds.0': ${rule}`],
      [
        'PUT',
        '/accounts/audited-soft/limits',
        { costAlertThresholds: Array.from({ length: 11 }, (_, i) => i + 1) },
        'invalid_costAlertThresholds',
        `Invalid 'costAlertThresholds': ${rule}`,
      ],
    ] as const) {
      const refused = await added(() => admin(method, path, body), 400);
      t.deepEqual(refused, [], 'a refusal records nothing');
      t.like(await (await admin(method, path, body)).json(), { error: { code, message } });
    }
  },
);

test.serial('GET /audit filters by since, action, key and account, newest first, a page at a time', async (t) => {
  const account = 'audited-filters';
  const keys: string[] = [];
  for (let index = 0; index < 3; index += 1) keys.push(((await (await admin('POST', '/keys', { account })).json()) as { id: string }).id);
  await admin('POST', `/keys/${keys[0]}/revoke`);
  const rotated = (await (await admin('POST', `/keys/${keys[1]}/rotate`, { grace_seconds: 0 })).json()) as { id: string };

  const ofAccount = await audit(`?account=${account}`);
  t.deepEqual(
    ofAccount.data.map((entry) => entry.action),
    ['key.rotated', 'key.revoked', 'key.created', 'key.created', 'key.created'],
  );
  t.deepEqual(
    (await audit(`?account=${account}&action=key.revoked`)).data.map((entry) => entry.key_id),
    [keys[0]],
  );
  t.deepEqual(
    (await audit(`?key=${keys[1]}`)).data.map((entry) => entry.action),
    ['key.rotated', 'key.created'],
  );
  t.deepEqual(
    (await audit(`?key=${rotated.id}`)).data.map((entry) => entry.action),
    ['key.rotated'],
    'the rotation that made a key is about it',
  );
  const newest = ofAccount.data[0]?.at ?? 0;
  t.deepEqual((await audit(`?account=${account}&since=${newest + 3600}`)).data, []);
  t.is((await audit(`?account=${account}&since=${new Date(newest * 1000).toISOString().slice(0, 10)}`)).data.length, 5);

  const seen: string[] = [];
  let page = await audit(`?account=${account}&limit=2`);
  t.true(page.has_more);
  for (;;) {
    seen.push(...page.data.map((entry) => entry.id));
    if (page.next_cursor === null) break;
    t.true(page.has_more);
    page = await audit(`?account=${account}&limit=2&cursor=${page.next_cursor}`);
  }
  t.false(page.has_more);
  t.deepEqual(
    seen,
    ofAccount.data.map((entry) => entry.id),
  );
});

test.serial('GET /audit validates every parameter, 400 naming it, and needs an admin credential', async (t) => {
  const cases: Array<[string, string]> = [
    ['limit=0', 'invalid_limit'],
    ['limit=101', 'invalid_limit'],
    ['limit=ten', 'invalid_limit'],
    ['cursor=abc', 'invalid_cursor'],
    ['cursor=0', 'invalid_cursor'],
    ['action=key.deleted', 'invalid_action'],
    ['since=yesterday', 'invalid_since'],
    ['key=a%20b', 'invalid_key'],
    ['account=', 'invalid_account'],
    ['action=key.created&action=key.revoked', 'invalid_action'],
    ['page=2', 'unknown_field'],
  ];
  for (const [query, code] of cases) {
    const response = await admin('GET', `/audit?${query}`);
    t.is(response.status, 400, query);
    t.like(await response.json(), { error: { type: 'invalid_request_error', code } }, query);
  }
  const apiKey = await app.keyFor();
  t.is((await call('GET', '/audit', { authorization: `Bearer ${apiKey}` })).status, 401);
});

/** An app whose one handler "changes something" and answers `status`, behind `auditTrail(options)`. */
async function serve(
  store: AuditStore,
  status: number,
  onError?: (err: unknown) => void,
  event: AuditEvent = { action: 'key.revoked', keyId: 'key_x', account: 'acme' },
) {
  const koaApp = new Koa();
  koaApp.use(gatewayErrors());
  koaApp.use(async (ctx, next) => {
    ctx.state.admin = { tokenId: memoryToken.id, tokenName: memoryToken.name, role: 'admin' };
    return next();
  });
  koaApp.use(auditTrail({ store, timeoutMs: 50, nowMs: () => 1_900_000_000_500, ...(onError && { onError }) }));
  koaApp.use((ctx) => {
    ctx.state.audit = event;
    ctx.status = status;
    ctx.body = { done: true };
  });
  const server = await listen(koaApp);
  try {
    return await fetch(server.url, { method: 'POST' });
  } finally {
    await server.close();
  }
}

test('a 2xx answer is recorded once, with the token, its name, the time in whole seconds and the address', async (t) => {
  const store = new MemoryAuditStore();
  t.is((await serve(store, 200, undefined, { action: 'key.updated', keyId: 'key_x', account: 'acme', fields: ['scopes'] })).status, 200);
  const { entries } = await store.list({}, { limit: 10 });
  t.is(entries.length, 1);
  t.like(entries[0], {
    at: 1_900_000_000,
    action: 'key.updated',
    actor: { type: 'admin_token', id: memoryToken.id, name: 'ci' },
    keyId: 'key_x',
    account: 'acme',
    tokenId: null,
    replacementId: null,
    fields: ['scopes'],
  });
  t.regex(entries[0]?.address ?? '', /127\.0\.0\.1/);
});

test('a 4xx or 5xx answer records nothing', async (t) => {
  const store = new MemoryAuditStore();
  for (const status of [400, 404, 409, 503]) t.is((await serve(store, status)).status, status);
  t.deepEqual((await store.list({}, { limit: 10 })).entries, []);
});

test('an audit store that fails or stalls leaves the answer as it was, and reports the lost entry to onError', async (t) => {
  const failing: AuditStore = {
    append: async (_entry: NewAuditEntry): Promise<AuditEntry> => Promise.reject(new Error('disk full')),
    list: async () => ({ entries: [], nextCursor: null }),
  };
  const stalled: AuditStore = { ...failing, append: () => new Promise<AuditEntry>(() => undefined) };
  for (const store of [failing, stalled]) {
    const errors: unknown[] = [];
    const response = await serve(store, 201, (err) => errors.push(err));
    t.is(response.status, 201);
    t.deepEqual(await response.json(), { done: true });
    t.is(errors.length, 1);
    t.true(errors[0] instanceof Error);
  }
  // Without onError, the answer is the same.
  t.is((await serve(failing, 200)).status, 200);
});

test('options are checked once, at start-up', (t) => {
  const store = new MemoryAuditStore();
  t.throws(() => auditTrail({ store: {} as AuditStore }), { instanceOf: TypeError, message: /AuditStore/ });
  t.throws(() => auditTrail({ store, timeoutMs: 0 }), { instanceOf: TypeError, message: /timeoutMs/ });
});
