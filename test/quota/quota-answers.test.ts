import { randomBytes } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { Redis } from 'ioredis';
import Koa from 'koa';
import knexFactory from 'knex';
import { anthropicErrors } from '../../lib/errors/anthropic-errors.js';
import { errors } from '../../lib/errors/gateway-error.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { fileQuota } from '../../lib/files/file-quota.js';
import type { FileStore } from '../../lib/files/file-store.js';
import type { CreationLimiter } from '../../lib/quota/creation-limiter.js';
import type { CreationLimitsOptions } from '../../lib/quota/creation-limits.js';
import { MemoryModelLimiter } from '../../lib/stores/memory/model-limiter.js';
import type { ModelLimitDecision, ModelLimits } from '../../lib/quota/model-limits.js';
import { goDuration, modelLimitRefusal, rateLimitHeaders, type RateLimitHeaderStyle } from '../../lib/quota/rate-limit-headers.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { MemoryCreationLimiter } from '../../lib/stores/memory/creation-limiter.js';
import { createRedisClient } from '../../lib/stores/redis/client.js';
import { RedisCreationLimiter } from '../../lib/stores/redis/creation-limiter.js';
import { newAccount, testClock } from '../../lib/testing/creation-limiter-contract.js';
import { filesApp, type FilesApp, type FilesAppOptions } from '../helpers/files-app.js';
import { listen, type Listening } from '../helpers/http.js';
import { multipart, pdfOf, uploadParts } from '../helpers/multipart.js';
import { REDIS_URL, postgresDatabase, withPostgres, withRedis, type TestDatabase } from '../helpers/services.js';

// How the quotas answer over HTTP: fileQuota's refusals, the files API's rates and stock together,
// and the rate-limit headers and refusals of model calls.

// fileQuota.

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

function quotaUpload(app: Listening, account: string, bytes: number, fail = ''): Promise<Response> {
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
  for (let i = 0; i < 10; i += 1) t.is((await quotaUpload(app, account, 100)).status, 201);
  const refused = await quotaUpload(app, account, 100);
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
  t.is((await quotaUpload(app, account, 999)).status, 201);
  const refused = await quotaUpload(app, account, 2);
  t.is(refused.status, 429);
  t.deepEqual(await refused.json(), rateLimitBody('ingestion_quota_exceeded', 'Ingestion quota exceeded'));
  t.is(refused.headers.get('retry-after'), '3600');
  t.is((await quotaUpload(app, account, 1)).status, 201);
});

test('a creation refused downstream (storage quota) gives its rates back, and says not to retry', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const limiter = new MemoryCreationLimiter({ nowMs: time.nowMs });
  const app = await quotaApp(limiter);
  t.teardown(app.close);
  const account = newAccount();
  await quotaUpload(app, account, 10);
  const refused = await quotaUpload(app, account, 500, 'storage');
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
  const failed = await quotaUpload(app, account, 500, 'crash');
  t.is(failed.status, 500);
  t.like(await failed.json(), { error: { code: 'internal_error' } });
  t.deepEqual(await limiter.usage(account), { createsThisMinute: 0, createsToday: 0, bytesToday: 0 });
  t.is((await quotaUpload(app, account, 500)).status, 201);
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
  const refused = await quotaUpload(app, newAccount(), 1, 'storage');
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
  const response = await quotaUpload(app, newAccount(), 1);
  t.is(response.status, 503);
  t.deepEqual(await response.json(), {
    error: { message: 'Service temporarily unavailable', type: 'server_error', param: null, code: 'service_unavailable' },
  });
  t.is(response.headers.get('retry-after'), null);
});

test('fileQuota() needs a CreationLimiter', (t) => {
  t.throws(() => fileQuota({} as Parameters<typeof fileQuota>[0]), { instanceOf: TypeError, message: /needs a CreationLimiter as `creationLimiter`/ });
});

// The files API: the rates (fileQuota) and the stock (the FileStore) together.

const ACCOUNT = 'acct-a'; // filesApp's keys.a
const cleanups: (() => Promise<void> | void)[] = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function startFilesApp(t: ExecutionContext, options: FilesAppOptions): Promise<FilesApp> {
  const started = await filesApp(options);
  t.teardown(() => started.close());
  return started;
}

function uploadPdf(target: FilesApp, pdf: Buffer): Promise<Response> {
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
  const target = await startFilesApp(t, { creationLimiter: limiter });
  const responses = await Promise.all(Array.from({ length: 50 }, () => uploadPdf(target, pdfOf(1000))));
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
    await startFilesApp(t, { files, blobs, creationLimiter: limiters[0], limits: filesAppLimits }),
    await startFilesApp(t, { files: new KnexFileStore(secondPool), blobs, creationLimiter: limiters[1], limits: filesAppLimits }),
  ] as const;
  return { servers, limiters, files };
}

services('Redis + PostgreSQL, two servers: parallel uploads near the stored-bytes line never leave the account over it', async (t) => {
  const { servers, limiters, files } = await twoServers(t, { createsPerMinute: 100 }, { maxStoredBytes: 10_000 });
  const responses = await Promise.all(Array.from({ length: 30 }, (_, i) => uploadPdf(servers[i % 2 === 0 ? 0 : 1], pdfOf(1000))));
  t.deepEqual(await codes(responses), { created: 10, storage_quota_exceeded: 20 });
  t.deepEqual(await files.usage(ACCOUNT, servers[0].clock.seconds), { files: 10, bytes: 10_000 });
  // The 20 refused by the stock gave their rates back.
  t.deepEqual(await limiters[0].usage(ACCOUNT), { createsThisMinute: 10, createsToday: 10, bytesToday: 10_000 });
});

test('an upload rejected as not a PDF leaves every counter as it was', async (t) => {
  const limiter = memoryLimiter();
  const target = await startFilesApp(t, { creationLimiter: limiter });
  t.is((await uploadPdf(target, pdfOf(1000))).status, 200);
  const before = { rates: await limiter.usage(ACCOUNT), stock: await target.files.usage(ACCOUNT, target.clock.seconds) };
  const notPdf = Buffer.from('GIF89a, not a PDF at all');
  const res = await uploadPdf(target, notPdf);
  t.is(res.status, 400);
  t.like(await res.json(), { error: { code: 'invalid_file_format' } });
  t.deepEqual({ rates: await limiter.usage(ACCOUNT), stock: await target.files.usage(ACCOUNT, target.clock.seconds) }, before);
});

test('storage_quota_exceeded says x-should-retry: false, and gives the rates back', async (t) => {
  const limiter = memoryLimiter();
  const target = await startFilesApp(t, { creationLimiter: limiter, limits: { maxFiles: 2 } });
  for (let i = 0; i < 2; i += 1) t.is((await uploadPdf(target, pdfOf(1000))).status, 200);
  const refused = await uploadPdf(target, pdfOf(1000));
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
  const target = await startFilesApp(t, { creationLimiter: limiter, limits: { maxFiles: 1 } });
  const first = (await (await uploadPdf(target, pdfOf(1000))).json()) as { id: string };
  t.is((await uploadPdf(target, pdfOf(1000))).status, 429); // the stock is full
  const deleted = await fetch(`${target.url}/v1/files/${first.id}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${target.keys.a}` },
  });
  t.is(deleted.status, 200);
  t.is((await uploadPdf(target, pdfOf(1000))).status, 200); // freed at once
  // Two created, one deleted: both still count toward the rates.
  t.deepEqual(await limiter.usage(ACCOUNT), { createsThisMinute: 2, createsToday: 2, bytesToday: 2000 });
});

// The rate-limit headers and refusals of model calls.

test("reset durations are written as OpenAI writes them (Go's duration text)", (t) => {
  const cases: Array<[number, string]> = [
    [0, '0s'],
    [12, '12ms'],
    [999.2, '1s'],
    [1000, '1s'],
    [17_500, '17.5s'],
    [44_700, '44.7s'],
    [360_000, '6m0s'],
    [252_172, '4m12.172s'],
    [3_600_000, '1h0m0s'],
    [85_656_648, '23h47m36.648s'],
  ];
  for (const [ms, text] of cases) t.is(goDuration(ms), text, String(ms));
});

/** A decision of a fresh limiter after `calls` calls and `tokens` tokens, at 12:00:15.300. */
async function decisionAfter(limits: ModelLimits, calls: number, tokens = 0): Promise<ModelLimitDecision> {
  const limiter = new MemoryModelLimiter({ nowMs: testClock('2030-01-15T12:00:15.300Z').nowMs });
  for (let i = 0; i < calls; i += 1) await limiter.consume('key_1', limits);
  await limiter.addTokens('key_1', limits, tokens);
  return limiter.consume('key_1', limits);
}

test('OpenAI style: x-ratelimit-limit, -remaining and -reset for requests and tokens', async (t) => {
  const decision = await decisionAfter({ requestsPerMinute: 60, tokensPerMinute: 150_000, tokensPerDay: 10_000_000 }, 1, 16);
  t.deepEqual(rateLimitHeaders(decision, 'openai'), {
    'x-ratelimit-limit-requests': '60',
    'x-ratelimit-remaining-requests': '58',
    'x-ratelimit-reset-requests': '44.7s',
    'x-ratelimit-limit-tokens': '150000',
    'x-ratelimit-remaining-tokens': '149984',
    'x-ratelimit-reset-tokens': '44.7s',
  });
});

test('Anthropic style: anthropic-ratelimit-*-limit, -remaining and an RFC 3339 -reset; the day window when it has fewer tokens left', async (t) => {
  const decision = await decisionAfter({ requestsPerMinute: 50, tokensPerMinute: 40_000, tokensPerDay: 1000 }, 0, 400);
  t.deepEqual(rateLimitHeaders(decision, 'anthropic'), {
    'anthropic-ratelimit-requests-limit': '50',
    'anthropic-ratelimit-requests-remaining': '49',
    'anthropic-ratelimit-requests-reset': '2030-01-15T12:01:00Z',
    'anthropic-ratelimit-tokens-limit': '1000',
    'anthropic-ratelimit-tokens-remaining': '600',
    'anthropic-ratelimit-tokens-reset': '2030-01-16T00:00:00Z',
  });
});

test('a key without limits gets no rate-limit headers; a dimension without a limit gets none of its own', async (t) => {
  t.deepEqual(rateLimitHeaders(await decisionAfter({}, 3), 'openai'), {});
  t.deepEqual(Object.keys(rateLimitHeaders(await decisionAfter({ tokensPerDay: 5 }, 0), 'anthropic')), [
    'anthropic-ratelimit-tokens-limit',
    'anthropic-ratelimit-tokens-remaining',
    'anthropic-ratelimit-tokens-reset',
  ]);
});

/** The answer of an app whose handler throws `modelLimitRefusal(decision, style)` behind the style's formatter. */
async function refusalAnswer(decision: ModelLimitDecision, style: RateLimitHeaderStyle) {
  const app = new Koa();
  app.use(style === 'openai' ? openAIErrors() : anthropicErrors());
  app.use(() => {
    throw modelLimitRefusal(decision, style);
  });
  const server = await listen(app);
  try {
    const res = await fetch(server.url, { method: 'POST' });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  } finally {
    await server.close();
  }
}

test('a refusal is a Shape A 429 rate_limit_exceeded naming the limit, with retry-after and the x-ratelimit headers', async (t) => {
  const refused = await decisionAfter({ requestsPerMinute: 3 }, 3);
  const answer = await refusalAnswer(refused, 'openai');
  t.is(answer.status, 429);
  t.deepEqual(answer.body, {
    error: { message: 'Rate limit exceeded: requests per minute', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' },
  });
  t.is(answer.headers.get('retry-after'), '45');
  t.is(answer.headers.get('x-ratelimit-remaining-requests'), '0');
  t.is(answer.headers.get('x-ratelimit-reset-requests'), '44.7s');
  t.regex(answer.headers.get('x-request-id') ?? '', /^req_/);
});

test('a refusal on Messages is a Shape B rate_limit_error with retry-after and the anthropic-ratelimit headers', async (t) => {
  const refused = await decisionAfter({ tokensPerDay: 100 }, 0, 150);
  const answer = await refusalAnswer(refused, 'anthropic');
  t.is(answer.status, 429);
  t.like(answer.body, { type: 'error', error: { type: 'rate_limit_error', message: 'Rate limit exceeded: tokens per day' } });
  t.is(answer.headers.get('retry-after'), String(Math.ceil((Date.parse('2030-01-16T00:00:00Z') - Date.parse('2030-01-15T12:00:15.300Z')) / 1000)));
  t.is(answer.headers.get('anthropic-ratelimit-tokens-remaining'), '0');
  t.is(answer.headers.get('anthropic-ratelimit-tokens-reset'), '2030-01-16T00:00:00Z');
});

test('modelLimitRefusal of a decision that passed is a TypeError (a bug in the caller)', async (t) => {
  const passed = await decisionAfter({ requestsPerMinute: 3 }, 0);
  t.throws(() => modelLimitRefusal(passed, 'openai'), { instanceOf: TypeError });
});
