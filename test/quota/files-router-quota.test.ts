import { randomBytes } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import type { Redis } from 'ioredis';
import knexFactory from 'knex';
import type { FileStore } from '../../lib/files/file-store.js';
import type { CreationLimitsOptions } from '../../lib/quota/creation-limits.js';
import { MemoryCreationLimiter } from '../../lib/stores/memory/creation-limiter.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { createRedisClient } from '../../lib/stores/redis/client.js';
import { RedisCreationLimiter } from '../../lib/stores/redis/creation-limiter.js';
import { filesApp, type FilesApp, type FilesAppOptions } from '../helpers/files-app.js';
import { multipart, pdfOf, uploadParts } from '../helpers/multipart.js';
import { testClock } from '../../lib/testing/creation-limiter-contract.js';
import { REDIS_URL, postgresDatabase, withPostgres, withRedis, type TestDatabase } from '../helpers/services.js';

// The quotas through the files API: the rates (fileQuota) and the stock (the FileStore) together.

const ACCOUNT = 'acct-a'; // filesApp's keys.a
const cleanups: (() => Promise<void> | void)[] = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function app(t: ExecutionContext, options: FilesAppOptions): Promise<FilesApp> {
  const started = await filesApp(options);
  t.teardown(() => started.close());
  return started;
}

function upload(target: FilesApp, pdf: Buffer): Promise<Response> {
  const { body, contentType } = multipart(uploadParts(pdf));
  return fetch(`${target.url}/v1/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${target.keys.a}`, 'content-type': contentType },
    body,
  });
}

async function codes(responses: Response[]): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const response of responses) {
    const code = response.status === 200 ? 'created' : ((await response.json()) as { error: { code: string } }).error.code;
    counts[code] = (counts[code] ?? 0) + 1;
  }
  return counts;
}

const noon = () => testClock('2030-01-15T12:00:00.000Z').nowMs;
const memoryLimiter = (options: CreationLimitsOptions = {}) => new MemoryCreationLimiter({ nowMs: noon(), ...options });

async function redisClient(): Promise<Redis> {
  const client = await createRedisClient(REDIS_URL);
  cleanups.push(() => client.disconnect());
  return client;
}

async function postgresFiles(): Promise<{ db: TestDatabase; files: FileStore }> {
  const db = await postgresDatabase();
  cleanups.push(() => db.destroy());
  await migrate(db.knex);
  return { db, files: new KnexFileStore(db.knex) };
}

test('memory: 50 parallel uploads by one account in one minute create exactly 10 files', async (t) => {
  const limiter = memoryLimiter();
  const target = await app(t, { creationLimiter: limiter });
  const responses = await Promise.all(Array.from({ length: 50 }, () => upload(target, pdfOf(1000))));
  t.deepEqual(await codes(responses), { created: 10, rate_limit_exceeded: 40 });
  t.deepEqual(await target.files.usage(ACCOUNT, target.clock.seconds), { files: 10, bytes: 10_000 });
  t.deepEqual(await limiter.usage(ACCOUNT), { createsThisMinute: 10, createsToday: 10, bytesToday: 10_000 });
});

const services = withRedis(withPostgres(test));

/** Two servers sharing one PostgreSQL schema (a pool each) and one Redis (a client each), as two processes would. */
async function twoServers(t: ExecutionContext, limits: CreationLimitsOptions, filesAppLimits: FilesAppOptions['limits'] = {}) {
  const { db, files } = await postgresFiles();
  const secondPool = knexFactory(db.config);
  cleanups.push(() => secondPool.destroy()); // runs before the schema is dropped: cleanups run in reverse
  const keyPrefix = `kmg-test:${randomBytes(6).toString('hex')}`;
  const blobs = new MemoryBlobStore();
  const nowMs = noon();
  const limiters = [
    new RedisCreationLimiter({ client: await redisClient(), keyPrefix, nowMs, ...limits }),
    new RedisCreationLimiter({ client: await redisClient(), keyPrefix, nowMs, ...limits }),
  ] as const;
  const servers = [
    await app(t, { files, blobs, creationLimiter: limiters[0], limits: filesAppLimits }),
    await app(t, { files: new KnexFileStore(secondPool), blobs, creationLimiter: limiters[1], limits: filesAppLimits }),
  ] as const;
  return { servers, limiters, files };
}

services('Redis + PostgreSQL, two servers: parallel uploads near the stored-bytes line never leave the account over it', async (t) => {
  const { servers, limiters, files } = await twoServers(t, { createsPerMinute: 100 }, { maxStoredBytes: 10_000 });
  const responses = await Promise.all(Array.from({ length: 30 }, (_, i) => upload(servers[i % 2 === 0 ? 0 : 1], pdfOf(1000))));
  t.deepEqual(await codes(responses), { created: 10, storage_quota_exceeded: 20 });
  t.deepEqual(await files.usage(ACCOUNT, servers[0].clock.seconds), { files: 10, bytes: 10_000 });
  // The 20 refused by the stock gave their rates back.
  t.deepEqual(await limiters[0].usage(ACCOUNT), { createsThisMinute: 10, createsToday: 10, bytesToday: 10_000 });
});

test('an upload rejected as not a PDF leaves every counter as it was', async (t) => {
  const limiter = memoryLimiter();
  const target = await app(t, { creationLimiter: limiter });
  t.is((await upload(target, pdfOf(1000))).status, 200);
  const before = { rates: await limiter.usage(ACCOUNT), stock: await target.files.usage(ACCOUNT, target.clock.seconds) };
  const notPdf = Buffer.from('GIF89a, not a PDF at all');
  const res = await upload(target, notPdf);
  t.is(res.status, 400);
  t.like(await res.json(), { error: { code: 'invalid_file_format' } });
  t.deepEqual({ rates: await limiter.usage(ACCOUNT), stock: await target.files.usage(ACCOUNT, target.clock.seconds) }, before);
});

test('storage_quota_exceeded says x-should-retry: false, and gives the rates back', async (t) => {
  const limiter = memoryLimiter();
  const target = await app(t, { creationLimiter: limiter, limits: { maxFiles: 2 } });
  for (let i = 0; i < 2; i += 1) t.is((await upload(target, pdfOf(1000))).status, 200);
  const refused = await upload(target, pdfOf(1000));
  t.is(refused.status, 429);
  t.deepEqual(await refused.json(), {
    error: { message: 'Storage quota exceeded', type: 'rate_limit_error', param: null, code: 'storage_quota_exceeded' },
  });
  t.is(refused.headers.get('x-should-retry'), 'false');
  t.is(refused.headers.get('retry-after'), null);
  t.deepEqual(await limiter.usage(ACCOUNT), { createsThisMinute: 2, createsToday: 2, bytesToday: 2000 });
});

test('deleting a file frees its stock at once, and does not refund the rates', async (t) => {
  const limiter = memoryLimiter({ createsPerMinute: 3 });
  const target = await app(t, { creationLimiter: limiter, limits: { maxFiles: 1 } });
  const first = (await (await upload(target, pdfOf(1000))).json()) as { id: string };
  t.is((await upload(target, pdfOf(1000))).status, 429); // the stock is full
  const deleted = await fetch(`${target.url}/v1/files/${first.id}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${target.keys.a}` },
  });
  t.is(deleted.status, 200);
  t.is((await upload(target, pdfOf(1000))).status, 200); // freed at once
  // Two created, one deleted: both still count toward the rates.
  t.deepEqual(await limiter.usage(ACCOUNT), { createsThisMinute: 2, createsToday: 2, bytesToday: 2000 });
});
