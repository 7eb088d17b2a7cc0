import test from 'ava';
import Koa from 'koa';
import { apiKey } from '../../lib/auth/api-key.js';
import type { KeyStore } from '../../lib/auth/key-store.js';
import { keyUseRecorder } from '../../lib/auth/key-use-recorder.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { listen } from '../helpers/http.js';

/** A memory store whose `touch` calls are counted (and can be made to fail or stall), on a clock and timers the test moves. */
function setup(touch?: (ids: readonly string[], atSeconds: number) => Promise<void>) {
  const store = new MemoryKeyStore();
  const writes: Array<{ ids: string[]; atSeconds: number }> = [];
  const counted: Pick<KeyStore, 'touch'> = {
    touch: (ids, atSeconds) => {
      writes.push({ ids: [...ids], atSeconds });
      return touch ? touch(ids, atSeconds) : store.touch(ids, atSeconds);
    },
  };
  const clock = { ms: 1_900_000_000_000 };
  const pending: Array<() => void> = [];
  const timers = { setTimeout: (callback: () => void) => pending.push(callback), clearTimeout: () => undefined };
  const errors: Error[] = [];
  const uses = keyUseRecorder({ store: counted, nowMs: () => clock.ms, timers, onError: (err) => errors.push(err) });
  const key = (account = 'acme') => createApiKey(store, { prefix: 'kmg', account, scopes: ['models:read'] });
  return { store, writes, clock, pending, errors, uses, key };
}

test('N uses of one key within a minute are one write; a use a minute later is another', async (t) => {
  const { store, writes, clock, uses, key } = setup();
  const { record } = await key();
  for (let i = 0; i < 50; i += 1) {
    uses.record(record.id);
    clock.ms += 1000; // 50 uses over 50 seconds
  }
  await uses.flush();
  t.deepEqual(writes, [{ ids: [record.id], atSeconds: 1_900_000_000 }]);
  t.is((await store.get(record.id))?.lastUsedAt, 1_900_000_000);
  for (let i = 0; i < 9; i += 1) uses.record(record.id);
  await uses.flush();
  t.is(writes.length, 1);
  clock.ms = 1_900_000_060_000;
  uses.record(record.id);
  await uses.flush();
  t.deepEqual(writes[1], { ids: [record.id], atSeconds: 1_900_000_060 });
  t.is((await store.get(record.id))?.lastUsedAt, 1_900_000_060);
});

test('the uses of several keys gathered before the timer fires are written in one call', async (t) => {
  const { store, writes, pending, uses, key } = setup();
  const [one, two] = [(await key()).record, (await key('globex')).record];
  uses.record(one.id);
  uses.record(two.id);
  uses.record(one.id);
  t.is(writes.length, 0);
  t.is(pending.length, 1);
  pending.shift()?.();
  await uses.flush();
  t.deepEqual(writes, [{ ids: [one.id, two.id], atSeconds: 1_900_000_000 }]);
  t.is((await store.get(two.id))?.lastUsedAt, 1_900_000_000);
});

test('a failed write goes to onError and is not thrown; a write that never ends does not hold up the request', async (t) => {
  const failing = setup(async () => {
    throw new Error('database away');
  });
  const { record } = await failing.key();
  failing.uses.record(record.id);
  await failing.uses.flush();
  t.is(failing.errors.length, 1);
  t.regex(failing.errors[0]?.message ?? '', /last use of 1 keys was not written/);

  const stalled = setup(() => new Promise<void>(() => undefined));
  const { key } = await stalled.key();
  const app = new Koa();
  app.use(gatewayErrors());
  app.use(apiKey({ store: stalled.store, uses: stalled.uses }));
  app.use((ctx) => {
    ctx.body = { ok: true };
  });
  const server = await listen(app);
  t.teardown(() => server.close());
  for (let i = 0; i < 3; i += 1) {
    const response = await fetch(`${server.url}/`, { headers: { authorization: `Bearer ${key}` } });
    t.is(response.status, 200);
    // Starts the write, which never ends, without waiting for it.
    void stalled.uses.flush();
  }
  t.is(stalled.writes.length, 1);
  t.is(stalled.errors.length, 0);
});

test('apiKey() notes each verified key and nothing else: unknown, revoked or missing keys are not noted', async (t) => {
  const { store, writes, uses, key } = setup();
  const [live, revoked] = [await key(), await key()];
  await store.revoke(revoked.record.id);
  const app = new Koa();
  app.use(gatewayErrors());
  app.use(apiKey({ store, uses }));
  app.use((ctx) => {
    ctx.body = { ok: true };
  });
  const server = await listen(app);
  t.teardown(() => server.close());
  const statuses = [];
  for (const header of [live.key, revoked.key, 'kmg_sk_unknown', ...Array.from({ length: 9 }, () => live.key)]) {
    statuses.push((await fetch(`${server.url}/`, { headers: { authorization: `Bearer ${header}` } })).status);
  }
  statuses.push((await fetch(`${server.url}/`)).status);
  t.deepEqual(statuses, [200, 401, 401, ...Array.from({ length: 9 }, () => 200), 401]);
  await uses.flush();
  // Ten requests with the key within the minute: one write.
  t.deepEqual(writes, [{ ids: [live.record.id], atSeconds: 1_900_000_000 }]);
  t.is((await store.get(live.record.id))?.lastUsedAt, 1_900_000_000);
  t.false('lastUsedAt' in ((await store.get(revoked.record.id)) as object));
});

test('keyUseRecorder() refuses what is not a KeyStore or a bad interval', (t) => {
  t.throws(() => keyUseRecorder({ store: {} as KeyStore }), { instanceOf: TypeError });
  t.throws(() => keyUseRecorder({ store: new MemoryKeyStore(), intervalMs: -1 }), { instanceOf: TypeError });
});
