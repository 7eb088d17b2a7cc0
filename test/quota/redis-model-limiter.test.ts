import test from 'ava';
import { Redis } from 'ioredis';
import { RedisModelLimiter } from '../../lib/stores/redis/model-limiter.js';
import { modelLimiterContract } from '../../lib/testing/model-limiter-contract.js';
import { newAccount as newKeyId, testClock } from '../../lib/testing/creation-limiter-contract.js';
import { redisClients } from '../helpers/redis-clients.js';
import { REDIS_URL, withRedis } from '../helpers/services.js';

const { client, keyPrefix } = redisClients(test);

const redisTest = withRedis(test);

modelLimiterContract(redisTest, 'redis', async (clock) => new RedisModelLimiter({ client: await client(), keyPrefix: keyPrefix(), nowMs: clock }));

redisTest('two processes sharing Redis: 50 parallel calls with 10 requests per minute, exactly 10 pass', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const shared = { keyPrefix: keyPrefix(), nowMs: time.nowMs };
  // Two clients, as two server processes would have.
  const processes = [new RedisModelLimiter({ client: await client(), ...shared }), new RedisModelLimiter({ client: await client(), ...shared })];
  const keyId = newKeyId();
  const decisions = await Promise.all(Array.from({ length: 50 }, (_, i) => processes[i % 2]!.consume(keyId, { requestsPerMinute: 10 })));
  t.is(decisions.filter((decision) => decision.allowed).length, 10);
  t.deepEqual(
    decisions.filter((decision) => decision.allowed).map((decision) => decision.requests?.remaining).sort((a, b) => a! - b!),
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
  );
  for (const each of processes) t.like(await each.usage(keyId), { requestsThisMinute: 10 });
});

redisTest('tokens added by one process refuse the calls of another', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const shared = { keyPrefix: keyPrefix(), nowMs: time.nowMs };
  const [one, two] = [new RedisModelLimiter({ client: await client(), ...shared }), new RedisModelLimiter({ client: await client(), ...shared })];
  const keyId = newKeyId();
  await one.addTokens(keyId, { tokensPerDay: 100 }, 100);
  t.like(await two.consume(keyId, { tokensPerDay: 100 }), { allowed: false, refusedBy: 'tokens' });
});

redisTest('a Redis that forgot the scripts (restarted, SCRIPT FLUSH) is given them again: calls keep counting', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const redis = await client();
  const limiter = new RedisModelLimiter({ client: redis, keyPrefix: keyPrefix(), nowMs: time.nowMs });
  const keyId = newKeyId();
  const limits = { requestsPerMinute: 5, tokensPerDay: 1000 };
  await limiter.consume(keyId, limits);
  await redis.script('FLUSH');
  t.like(await limiter.consume(keyId, limits), { allowed: true, requests: { remaining: 3 } });
  await redis.script('FLUSH');
  // Added in one turn: they go to Redis together.
  await Promise.all([limiter.addTokens(keyId, limits, 7), limiter.addTokens(keyId, limits, 5), limiter.addTokens(newKeyId(), limits, 1)]);
  t.like(await limiter.usage(keyId), { requestsThisMinute: 2, tokensToday: 12 });
});

redisTest('tokens added in one turn of the event loop are each counted, for their own key', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const limiter = new RedisModelLimiter({ client: await client(), keyPrefix: keyPrefix(), nowMs: time.nowMs });
  const keyIds = Array.from({ length: 20 }, () => newKeyId());
  await Promise.all(keyIds.map((keyId, index) => limiter.addTokens(keyId, { tokensPerMinute: 1000 }, index + 1)));
  t.deepEqual(
    await Promise.all(keyIds.map(async (keyId) => (await limiter.usage(keyId)).tokensThisMinute)),
    keyIds.map((_, index) => index + 1),
  );
});

redisTest('keys are named per key id and window, and expire a minute after their window', async (t) => {
  const time = testClock('2030-01-15T12:00:30.000Z');
  const redis = await client();
  const prefix = keyPrefix();
  const limiter = new RedisModelLimiter({ client: redis, keyPrefix: prefix, nowMs: time.nowMs });
  const limits = { requestsPerMinute: 5, tokensPerMinute: 100, tokensPerDay: 1000 };
  await limiter.consume('key:{odd}', limits);
  await limiter.addTokens('key:{odd}', limits, 7);
  const base = `${prefix}:{key%3A%7Bodd%7D}`;
  const minute = Math.floor(time.ms / 60_000);
  const [requests, tokens, day] = [`${base}:requests:${minute}`, `${base}:tokens:${minute}`, `${base}:tokens:2030-01-15`];
  t.deepEqual((await redis.keys(`${prefix}:*`)).sort(), [requests, tokens, day].sort());
  for (const key of [requests, tokens]) {
    const ttl = await redis.pttl(key);
    t.true(ttl > 85_000 && ttl <= 90_000, `${key}: ${ttl}`);
  }
  const dayTtl = await redis.pttl(day);
  t.true(dayTtl > 43_170_000 && dayTtl <= 43_230_000);
});

test('Redis options are checked at start-up', (t) => {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, enableOfflineQueue: false });
  const queued = new Redis(REDIS_URL, { lazyConnect: true });
  for (const bad of [{ keyPrefix: '' }, { timeoutMs: 0 }, { insurance: 'disk' as 'memory' }, { nowMs: 5 as unknown as () => number }]) {
    t.throws(() => new RedisModelLimiter({ client: redis, ...bad }), { instanceOf: TypeError, message: /^koa-model-gateway: / });
  }
  t.throws(() => new RedisModelLimiter({ client: queued }), { instanceOf: TypeError, message: /enableOfflineQueue: false/ });
});
