import { performance } from 'node:perf_hooks';
import anyTest, { type TestFn } from 'ava';
import type { Redis } from 'ioredis';
import { StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { toGatewayError } from '../../lib/errors/to-gateway-error.js';
import { createRedisClient } from '../../lib/stores/redis/client.js';
import { RedisCreationLimiter, type RedisCreationLimiterOptions } from '../../lib/stores/redis/creation-limiter.js';
import { RedisModelLimiter } from '../../lib/stores/redis/model-limiter.js';
import { assertRefused, newAccount, testClock } from '../../lib/testing/creation-limiter-contract.js';
import { ownRedis, type OwnRedis } from '../helpers/quota-redis-server.js';
import { withProgram } from '../helpers/services.js';

// Each test runs a redis-server of its own, to stop and start again; the shared one is left alone.
const test = await withProgram(anyTest as TestFn<{ server: OwnRedis; redis: Redis }>, 'redis-server');
test.beforeEach(async (t) => {
  const server = await ownRedis();
  const redis = await createRedisClient(server.url);
  redis.on('error', () => undefined); // the outages are deliberate
  t.context = { server, redis };
});
test.afterEach.always(async (t) => {
  t.context.redis?.disconnect();
  t.context.server?.resume();
  await t.context.server?.kill();
});

const zero = { createsThisMinute: 0, createsToday: 0, bytesToday: 0 };

function makeLimiter(redis: Redis, options: Omit<RedisCreationLimiterOptions, 'client'> = {}) {
  return new RedisCreationLimiter({ client: redis, nowMs: testClock('2030-01-15T12:00:00.000Z').nowMs, ...options });
}

async function reconnected(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
}

/** Far above the 500 ms timeout plus a busy machine's delays, far below a call that waits for Redis. */
const PROMPTLY_MS = 5000;

/** How long `start()` takes to settle, in ms. */
async function timed(start: () => Promise<unknown>): Promise<{ ms: number; outcome: Promise<unknown> }> {
  const started = performance.now();
  const outcome = start();
  await outcome.catch(() => undefined);
  return { ms: performance.now() - started, outcome };
}

test('Redis killed: reserve fails closed at once with a 503, and nothing is left inconsistent when it returns', async (t) => {
  const { server, redis } = t.context;
  const limiter = makeLimiter(redis);
  const account = newAccount();
  await limiter.reserve(account, 10);
  const failing = await limiter.reserve(account, 20); // its upload will fail while Redis is away
  await server.kill();

  const refused = await timed(() => limiter.reserve(account, 30));
  const err = await t.throwsAsync(refused.outcome, { instanceOf: StoreUnavailableError });
  t.true(refused.ms < PROMPTLY_MS, `answered in ${refused.ms} ms`);
  t.like(toGatewayError(err, 'POST', '/v1/files'), { status: 503, code: 'service_unavailable' });
  await t.throwsAsync(failing.release(), { instanceOf: StoreUnavailableError });

  await server.start();
  await reconnected(redis);
  // Redis came back empty (no persistence): the counters start again from zero, and the
  // release that failed during the outage, tried again, gives nothing to the new counters.
  t.deepEqual(await limiter.usage(account), zero);
  await limiter.reserve(account, 40);
  await failing.release();
  t.deepEqual(await limiter.usage(account), { createsThisMinute: 1, createsToday: 1, bytesToday: 40 });
});

test('Redis not answering: reserve fails closed within the timeout, and the late answer is given back', async (t) => {
  const { server, redis } = t.context;
  const limiter = makeLimiter(redis);
  const account = newAccount();
  await limiter.reserve(account, 10);
  server.pause();

  const refused = await timed(() => limiter.reserve(account, 20));
  await t.throwsAsync(refused.outcome, { instanceOf: StoreUnavailableError, message: 'Redis did not answer within 500 ms' });
  t.true(refused.ms < PROMPTLY_MS, `answered in ${refused.ms} ms`);

  server.resume();
  // The script runs when Redis wakes up; its answer, read before this ping's, releases it.
  await redis.ping();
  t.deepEqual(await limiter.usage(account), { createsThisMinute: 1, createsToday: 1, bytesToday: 10 });
});

test("insurance: 'memory' fails open per process, with the same limits, and goes back to Redis when it returns", async (t) => {
  const { server, redis } = t.context;
  const limiter = makeLimiter(redis, { insurance: 'memory', createsPerMinute: 3 });
  const account = newAccount();
  await limiter.reserve(account, 1);
  await limiter.reserve(account, 1);
  await server.kill();

  // Redis counted two; the process's own counters start from zero.
  const insured = [await limiter.reserve(account, 1), await limiter.reserve(account, 1), await limiter.reserve(account, 1)];
  await assertRefused(t, limiter.reserve(account, 1), 'rate_limit_exceeded', 60);
  await insured[0]?.release();
  await t.notThrowsAsync(limiter.reserve(account, 1));

  await server.start();
  await reconnected(redis);
  await limiter.reserve(account, 5);
  t.deepEqual(await limiter.usage(account), { createsThisMinute: 1, createsToday: 1, bytesToday: 5 });
});

test('createRedisClient gives up with StoreUnavailableError when Redis is not there at start-up', async (t) => {
  const { server } = t.context;
  await server.kill();
  await t.throwsAsync(createRedisClient(server.url, { readyTimeoutMs: 300 }), {
    instanceOf: StoreUnavailableError,
    message: 'Redis was not ready within 300 ms',
  });
});

test('model limits, Redis killed: consume and addTokens fail closed at once with a 503', async (t) => {
  const { server, redis } = t.context;
  const limiter = new RedisModelLimiter({ client: redis });
  const limits = { requestsPerMinute: 5, tokensPerDay: 100 };
  const keyId = newAccount();
  t.true((await limiter.consume(keyId, limits)).allowed);
  await server.kill();
  const refused = await timed(() => limiter.consume(keyId, limits));
  const err = await t.throwsAsync(refused.outcome, { instanceOf: StoreUnavailableError });
  t.true(refused.ms < PROMPTLY_MS, `answered in ${refused.ms} ms`);
  t.like(toGatewayError(err, 'POST', '/v1/chat/completions'), { status: 503, code: 'service_unavailable' });
  await t.throwsAsync(limiter.addTokens(keyId, limits, 10), { instanceOf: StoreUnavailableError });
  // Limits without any field never ask Redis.
  t.true((await limiter.consume(keyId, {})).allowed);
});

test("model limits, insurance: 'memory': the process counts on its own while Redis is away", async (t) => {
  const { server, redis } = t.context;
  const limiter = new RedisModelLimiter({ client: redis, insurance: 'memory', nowMs: testClock('2030-01-15T12:00:00.000Z').nowMs });
  const limits = { requestsPerMinute: 2, tokensPerDay: 100 };
  const keyId = newAccount();
  t.true((await limiter.consume(keyId, limits)).allowed);
  await server.kill();
  t.true((await limiter.consume(keyId, limits)).allowed);
  t.true((await limiter.consume(keyId, limits)).allowed);
  t.like(await limiter.consume(keyId, limits), { allowed: false, refusedBy: 'requests' });
  await limiter.addTokens(keyId, { tokensPerDay: 100 }, 100);
  t.like(await limiter.consume(keyId, { tokensPerDay: 100 }), { allowed: false, refusedBy: 'tokens' });
});
