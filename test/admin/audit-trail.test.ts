import test from 'ava';
import Koa from 'koa';
import type { AuditEntry, AuditEvent, AuditStore, NewAuditEntry } from '../../lib/admin/audit-store.js';
import { auditTrail } from '../../lib/admin/audit-trail.js';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import { MemoryAdminTokenStore } from '../../lib/stores/memory/admin-token-store.js';
import { MemoryAuditStore } from '../../lib/stores/memory/audit-store.js';
import { listen } from '../helpers/http.js';

// auditTrail() on its own: what it records, and that an audit store failing or stalled never
// changes the answer to a change that was made.

const tokens = new MemoryAdminTokenStore();
const token = await tokens.create({ hash: 'a'.repeat(64), name: 'ci' });

/** An app whose one handler "changes something" and answers `status`, behind `auditTrail(options)`. */
async function serve(store: AuditStore, status: number, onError?: (err: unknown) => void, event: AuditEvent = { action: 'key.revoked', keyId: 'key_x', account: 'acme' }) {
  const app = new Koa();
  app.use(gatewayErrors());
  app.use(async (ctx, next) => {
    ctx.state.admin = { tokenId: token.id, tokenName: token.name };
    return next();
  });
  app.use(auditTrail({ store, timeoutMs: 50, nowMs: () => 1_900_000_000_500, ...(onError && { onError }) }));
  app.use((ctx) => {
    ctx.state.audit = event;
    ctx.status = status;
    ctx.body = { done: true };
  });
  const server = await listen(app);
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
    actor: { type: 'admin_token', id: token.id, name: 'ci' },
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
