import { join } from 'node:path';
import anyTest, { type TestFn } from 'ava';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import { runCommand } from '../../reference-server/commands/index.js';
import { ownRedis } from '../helpers/quota-redis-server.js';
import { spawnCli, tempDataDir } from '../helpers/server-process.js';
import { withProgram } from '../helpers/services.js';
import { referenceApp } from '../spec/reference-app.js';

// Admin changes with Redis stalled (SIGSTOP: the connection stays open, nothing answers): the
// change is made in the database and answered; its announcement gives up after the limiters'
// timeout (500 ms), and the other processes see the change when their key cache expires.
const test = await withProgram(anyTest as TestFn, 'redis-server');

/** A long stall, ended by the test's teardown: an admin change that waited for Redis would answer only then. */
const STALL_MS = 20_000;

test('revoke, PATCH and rotate answer while Redis stalls: the database write commits, the announcement gives up', async (t) => {
  const redis = await ownRedis();
  t.teardown(() => redis.kill());
  const app = await referenceApp(undefined, { REDIS_URL: redis.url });
  t.teardown(() => app.close());
  const { token } = await createAdminToken(app.deployment.adminTokens, { prefix: app.config.gateway.keyPrefix });
  const admin = (method: string, path: string, body?: unknown) =>
    fetch(`${app.url}/admin/v1${path}`, {
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
  const store = app.deployment.keys;
  t.is(typeof (await store.get(revoked.id))?.revokedAt, 'number');
  t.deepEqual((await store.get(patched.id))?.scopes, ['models:read']);
  t.like(await store.findByHash((await store.list({ account: 'stalled' })).at(-1)?.hash ?? ''), { account: 'stalled', revokedAt: null });
  t.truthy(replacement.key);
  // In this process, at once; the operator is told that the others see it within keyCacheSeconds.
  const models = async (key: string) => (await fetch(`${app.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status;
  t.is(await models(revoked.key), 401);
  t.is(await models(rotated.key), 401);
  const warnings = app.logs.filter((line) => line.msg.startsWith('key change made but not announced'));
  t.deepEqual(warnings.map((line) => line.keyId).sort(), [revoked.id, patched.id, rotated.id].sort());
});

test('keys revoke on the command line, Redis stalled: the revocation stands, one warning line says when the servers refuse the key, exit 0', async (t) => {
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
});
