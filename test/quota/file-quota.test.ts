import test from 'ava';
import Koa from 'koa';
import { Redis } from 'ioredis';
import { errors } from '../../lib/errors/gateway-error.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import type { CreationLimiter } from '../../lib/quota/creation-limiter.js';
import { fileQuota } from '../../lib/files/file-quota.js';
import { MemoryCreationLimiter } from '../../lib/stores/memory/creation-limiter.js';
import { RedisCreationLimiter } from '../../lib/stores/redis/creation-limiter.js';
import { listen, type Listening } from '../helpers/http.js';
import { newAccount, testClock } from '../../lib/testing/creation-limiter-contract.js';

/**
 * openAIErrors + a stand-in for apiKey() and pdfUpload() (account and size from headers) +
 * fileQuota + a handler that creates the file, or fails as `x-test-fail` says.
 */
async function quotaApp(limiter: CreationLimiter): Promise<Listening & { appErrors: unknown[] }> {
  const appErrors: unknown[] = [];
  const app = new Koa();
  app.on('error', (err: unknown) => appErrors.push(err));
  app.use(openAIErrors());
  app.use(async function fakeUpload(ctx, next) {
    ctx.state.apiKey = { id: 'key_test', account: ctx.get('x-test-account'), scopes: ['files:write'], models: null };
    ctx.state.upload = { path: '/nowhere', filename: 'a.pdf', bytes: Number(ctx.get('x-test-bytes')), expiresAfterSeconds: null };
    await next();
  });
  app.use(fileQuota({ creationLimiter: limiter }));
  app.use(async function createFile(ctx) {
    switch (ctx.get('x-test-fail')) {
      case 'storage':
        throw errors.storageQuotaExceeded();
      case 'crash':
        throw new Error('the blob store fell over');
      default:
        ctx.status = 201;
        ctx.body = { object: 'file' };
    }
  });
  return { ...(await listen(app)), appErrors };
}

function upload(app: Listening, account: string, bytes: number, fail = ''): Promise<Response> {
  return fetch(`${app.url}/v1/files`, {
    method: 'POST',
    headers: { 'x-test-account': account, 'x-test-bytes': String(bytes), 'x-test-fail': fail },
  });
}

const rateLimitBody = (code: string, message: string) => ({ error: { message, type: 'rate_limit_error', param: null, code } });

test('the 11th creation in a minute is a 429 rate_limit_exceeded with retry-after, per decisions.md', async (t) => {
  const time = testClock('2030-01-15T12:00:15.300Z');
  const app = await quotaApp(new MemoryCreationLimiter({ nowMs: time.nowMs }));
  t.teardown(app.close);
  const account = newAccount();
  for (let i = 0; i < 10; i += 1) t.is((await upload(app, account, 100)).status, 201);
  const refused = await upload(app, account, 100);
  t.is(refused.status, 429);
  t.deepEqual(await refused.json(), rateLimitBody('rate_limit_exceeded', 'Create rate exceeded'));
  t.is(refused.headers.get('retry-after'), '45');
  t.is(refused.headers.get('x-should-retry'), null);
  t.regex(refused.headers.get('x-request-id') ?? '', /^req_[A-Za-z0-9]{32}$/);
});

test('the byte that goes past the day is a 429 ingestion_quota_exceeded with retry-after to UTC midnight', async (t) => {
  const time = testClock('2030-01-15T23:00:00.000Z');
  const app = await quotaApp(new MemoryCreationLimiter({ bytesPerDay: 1000, nowMs: time.nowMs }));
  t.teardown(app.close);
  const account = newAccount();
  t.is((await upload(app, account, 999)).status, 201);
  const refused = await upload(app, account, 2);
  t.is(refused.status, 429);
  t.deepEqual(await refused.json(), rateLimitBody('ingestion_quota_exceeded', 'Ingestion quota exceeded'));
  t.is(refused.headers.get('retry-after'), '3600');
  t.is((await upload(app, account, 1)).status, 201);
});

test('a creation refused downstream (storage quota) gives its rates back, and says not to retry', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const limiter = new MemoryCreationLimiter({ nowMs: time.nowMs });
  const app = await quotaApp(limiter);
  t.teardown(app.close);
  const account = newAccount();
  await upload(app, account, 10);
  const refused = await upload(app, account, 500, 'storage');
  t.is(refused.status, 429);
  t.deepEqual(await refused.json(), rateLimitBody('storage_quota_exceeded', 'Storage quota exceeded'));
  t.is(refused.headers.get('x-should-retry'), 'false');
  t.is(refused.headers.get('retry-after'), null);
  t.deepEqual(await limiter.usage(account), { createsThisMinute: 1, createsToday: 1, bytesToday: 10 });
});

test('a creation that fails downstream gives its rates back', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const limiter = new MemoryCreationLimiter({ createsPerMinute: 1, nowMs: time.nowMs });
  const app = await quotaApp(limiter);
  t.teardown(app.close);
  const account = newAccount();
  const failed = await upload(app, account, 500, 'crash');
  t.is(failed.status, 500);
  t.like(await failed.json(), { error: { code: 'internal_error' } });
  t.deepEqual(await limiter.usage(account), { createsThisMinute: 0, createsToday: 0, bytesToday: 0 });
  t.is((await upload(app, account, 500)).status, 201);
});

test('a release that fails does not hide the error that failed the upload; it is reported', async (t) => {
  const releaseError = new Error('release failed');
  const limiter: CreationLimiter = {
    reserve: async () => ({
      release: async () => {
        throw releaseError;
      },
    }),
  };
  const app = await quotaApp(limiter);
  t.teardown(app.close);
  const refused = await upload(app, newAccount(), 1, 'storage');
  t.is(refused.status, 429);
  t.like(await refused.json(), { error: { code: 'storage_quota_exceeded' } });
  t.deepEqual(app.appErrors, [releaseError]);
});

test('an unreachable Redis is a 503 service_unavailable, not a creation', async (t) => {
  // Nothing listens on port 1 and the offline queue is off: every command fails at once, as while Redis is down.
  const client = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
  client.on('error', () => undefined);
  t.teardown(() => client.disconnect());
  const app = await quotaApp(new RedisCreationLimiter({ client }));
  t.teardown(app.close);
  const response = await upload(app, newAccount(), 1);
  t.is(response.status, 503);
  t.deepEqual(await response.json(), {
    error: { message: 'Service temporarily unavailable', type: 'server_error', param: null, code: 'service_unavailable' },
  });
  t.is(response.headers.get('retry-after'), null);
});

test('fileQuota() needs a CreationLimiter', (t) => {
  t.throws(() => fileQuota({} as Parameters<typeof fileQuota>[0]), { instanceOf: TypeError, message: /needs a CreationLimiter as `creationLimiter`/ });
});
