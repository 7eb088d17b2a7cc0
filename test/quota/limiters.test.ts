import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import test from 'ava';
import { Redis } from 'ioredis';
import { StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { createRedisClient } from '../../lib/stores/redis/client.js';
import { RedisCreationLimiter } from '../../lib/stores/redis/creation-limiter.js';
import { RedisModelLimiter } from '../../lib/stores/redis/model-limiter.js';
import { answerWithin } from '../../lib/stores/redis/redis-limiter.js';
import { newAccount, newAccount as newKeyId, testClock } from '../../lib/testing/creation-limiter-contract.js';
import { redisClients } from '../helpers/redis-clients.js';
import { tcpProxy } from '../helpers/server-tcp-proxy.js';
import { REDIS_URL, withRedis } from '../helpers/services.js';

// The creation limiter (files) and the model limiter (model calls) on Redis: two processes sharing
// it, and the bound on each Redis call they make. Their contracts run in test/stores/memory-stores
// and redis-stores.

const { client, keyPrefix } = redisClients(test);

const redisTest = withRedis(test);

// The tests that count give Redis 5 s, not the default 500 ms: dozens of them run at once in this
// file, and a machine busy with the rest of the suite must not fail them by the clock. The bound
// itself is tested at the end of the file.
const COUNTING_TIMEOUT_MS = 5000;

// The creation limiter on Redis.

redisTest('two processes sharing Redis: 50 parallel reservations in one minute, exactly 10 pass', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const shared = { keyPrefix: keyPrefix(), nowMs: time.nowMs, timeoutMs: COUNTING_TIMEOUT_MS };
  // Two clients, as two server processes would have.
  const processes = [new RedisCreationLimiter({ client: await client(), ...shared }), new RedisCreationLimiter({ client: await client(), ...shared })];
  const account = newAccount();
  const results = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => processes[i % 2]?.reserve(account, 100)));
  t.is(results.filter((result) => result.status === 'fulfilled').length, 10);
  for (const each of processes) t.deepEqual(await each.usage(account), { createsThisMinute: 10, createsToday: 10, bytesToday: 1000 });
});

redisTest('two processes sharing Redis hold the day totals exactly', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const shared = { keyPrefix: keyPrefix(), nowMs: time.nowMs, timeoutMs: COUNTING_TIMEOUT_MS, createsPerMinute: 1000, createsPerDay: 30, bytesPerDay: 2000 };
  const processes = [new RedisCreationLimiter({ client: await client(), ...shared }), new RedisCreationLimiter({ client: await client(), ...shared })];
  const account = newAccount();
  // 40 ask for 100 bytes each: the bytes allow 20 of them, the count 30.
  const results = await Promise.allSettled(Array.from({ length: 40 }, (_, i) => processes[i % 2]?.reserve(account, 100)));
  const passed = results.filter((result) => result.status === 'fulfilled');
  t.is(passed.length, 20);
  t.deepEqual(await processes[0]?.usage(account), { createsThisMinute: 20, createsToday: 20, bytesToday: 2000 });
  // A reservation made by one process and released by the same is seen released by the other.
  const reservation = passed[0]?.status === 'fulfilled' ? passed[0].value : undefined;
  await reservation?.release();
  t.deepEqual(await processes[1]?.usage(account), { createsThisMinute: 19, createsToday: 19, bytesToday: 1900 });
});

redisTest('a reservation spent before Redis lost its data is not given back to the new counters', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const redis = await client();
  const prefix = keyPrefix();
  const limiter = new RedisCreationLimiter({ client: redis, keyPrefix: prefix, nowMs: time.nowMs, timeoutMs: COUNTING_TIMEOUT_MS });
  const account = newAccount();
  const before = await limiter.reserve(account, 100);
  // What a restart without persistence does to these keys.
  const keys = await redis.keys(`${prefix}:*`);
  t.is(keys.length, 2);
  await redis.del(...keys);
  await limiter.reserve(account, 7);
  await before.release();
  t.deepEqual(await limiter.usage(account), { createsThisMinute: 1, createsToday: 1, bytesToday: 7 });
});

redisTest('keys are named per account, minute and UTC day, and expire a minute after their window', async (t) => {
  const time = testClock('2030-01-15T12:00:30.000Z');
  const redis = await client();
  const prefix = keyPrefix();
  const limiter = new RedisCreationLimiter({ client: redis, keyPrefix: prefix, nowMs: time.nowMs, timeoutMs: COUNTING_TIMEOUT_MS });
  await limiter.reserve('acct:{odd}', 5);
  const minute = `${prefix}:{acct%3A%7Bodd%7D}:minute:${Math.floor(time.ms / 60_000)}`;
  const day = `${prefix}:{acct%3A%7Bodd%7D}:day:2030-01-15`;
  t.deepEqual((await redis.keys(`${prefix}:*`)).sort(), [day, minute].sort());
  const [minuteTtl, dayTtl] = await Promise.all([redis.pttl(minute), redis.pttl(day)]);
  t.true(minuteTtl > 85_000 && minuteTtl <= 90_000);
  t.true(dayTtl > 43_170_000 && dayTtl <= 43_230_000);
});

test('a client with the offline queue on is refused at start-up', (t) => {
  const queued = new Redis(REDIS_URL, { lazyConnect: true });
  t.throws(() => new RedisCreationLimiter({ client: queued }), {
    instanceOf: TypeError,
    message: /enableOfflineQueue: false/,
  });
});

test('RedisCreationLimiter: Redis options are checked at start-up', (t) => {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, enableOfflineQueue: false });
  for (const bad of [{ keyPrefix: '' }, { timeoutMs: 0 }, { insurance: 'disk' as 'memory' }, { createsPerDay: 0 }]) {
    t.throws(() => new RedisCreationLimiter({ client: redis, ...bad }), { instanceOf: TypeError, message: /^koa-model-gateway: / });
  }
});

// The model limiter on Redis.

redisTest('two processes sharing Redis: 50 parallel calls with 10 requests per minute, exactly 10 pass', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const shared = { keyPrefix: keyPrefix(), nowMs: time.nowMs, timeoutMs: COUNTING_TIMEOUT_MS };
  // Two clients, as two server processes would have.
  const processes = [new RedisModelLimiter({ client: await client(), ...shared }), new RedisModelLimiter({ client: await client(), ...shared })];
  const keyId = newKeyId();
  const decisions = await Promise.all(Array.from({ length: 50 }, (_, i) => processes[i % 2]!.consume(keyId, { requestsPerMinute: 10 })));
  t.is(decisions.filter((decision) => decision.allowed).length, 10);
  t.deepEqual(
    decisions
      .filter((decision) => decision.allowed)
      .map((decision) => decision.requests?.remaining)
      .sort((a, b) => a! - b!),
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
  );
  for (const each of processes) t.like(await each.usage(keyId), { requestsThisMinute: 10 });
});

redisTest('tokens added by one process refuse the calls of another', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const shared = { keyPrefix: keyPrefix(), nowMs: time.nowMs, timeoutMs: COUNTING_TIMEOUT_MS };
  const [one, two] = [new RedisModelLimiter({ client: await client(), ...shared }), new RedisModelLimiter({ client: await client(), ...shared })];
  const keyId = newKeyId();
  await one.addTokens(keyId, { tokensPerDay: 100 }, 100);
  t.like(await two.consume(keyId, { tokensPerDay: 100 }), { allowed: false, refusedBy: 'tokens' });
});

redisTest('a Redis that forgot the scripts (restarted, SCRIPT FLUSH) is given them again: calls keep counting', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const redis = await client();
  const limiter = new RedisModelLimiter({ client: redis, keyPrefix: keyPrefix(), nowMs: time.nowMs, timeoutMs: COUNTING_TIMEOUT_MS });
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
  const limiter = new RedisModelLimiter({ client: await client(), keyPrefix: keyPrefix(), nowMs: time.nowMs, timeoutMs: COUNTING_TIMEOUT_MS });
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
  const limiter = new RedisModelLimiter({ client: redis, keyPrefix: prefix, nowMs: time.nowMs, timeoutMs: COUNTING_TIMEOUT_MS });
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

test('RedisModelLimiter: Redis options are checked at start-up', (t) => {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, enableOfflineQueue: false });
  const queued = new Redis(REDIS_URL, { lazyConnect: true });
  for (const bad of [{ keyPrefix: '' }, { timeoutMs: 0 }, { insurance: 'disk' as 'memory' }, { nowMs: 5 as unknown as () => number }]) {
    t.throws(() => new RedisModelLimiter({ client: redis, ...bad }), { instanceOf: TypeError, message: /^koa-model-gateway: / });
  }
  t.throws(() => new RedisModelLimiter({ client: queued }), { instanceOf: TypeError, message: /enableOfflineQueue: false/ });
});

// answerWithin, the bound on every Redis call of the limiters.

/** Both ends of a loopback TCP connection. */
async function socketPair(): Promise<{ client: Socket; server: Socket; close(): void }> {
  const listener = createServer().listen(0, '127.0.0.1');
  await once(listener, 'listening');
  const client = connect((listener.address() as AddressInfo).port, '127.0.0.1');
  const [[server]] = await Promise.all([once(listener, 'connection') as Promise<[Socket]>, once(client, 'connect')]);
  return {
    client,
    server,
    close() {
      client.destroy();
      server.destroy();
      listener.close();
    },
  };
}

const block = (ms: number) => {
  const until = Date.now() + ms;
  while (Date.now() < until);
};

// A starved process runs its expired timers before it reads its sockets: an answer that arrived
// during the stall is still taken, not refused by a timer that only fired late.
test('an answer that arrived while the event loop was stalled past the timeout is taken', async (t) => {
  const { client, server, close } = await socketPair();
  t.teardown(close);
  const answered = answerWithin(
    once(client, 'data').then(([chunk]) => String(chunk)),
    20,
  );
  server.write('PONG');
  block(100);
  t.is(await answered, 'PONG');
});

test('no answer within the timeout is StoreUnavailableError', async (t) => {
  const { client, close } = await socketPair();
  t.teardown(close);
  const error = await t.throwsAsync(answerWithin(once(client, 'data'), 20), { instanceOf: StoreUnavailableError });
  t.regex(String(error?.message), /did not answer within 20 ms/);
});

// A call goes to Redis at the end of its turn of the event loop (RedisScript.batched): the bound is
// on Redis's answer, from the moment the call is sent, not on the turn's own work before it.
// Serial: its stall would hold up the calls of every other test of the file.
redisTest.serial('a call made just before the event loop stalls past the timeout has the whole timeout for its answer', async (t) => {
  const { hostname, port } = new URL(REDIS_URL);
  const proxy = await tcpProxy({ host: hostname, port: Number(port) });
  t.teardown(() => proxy.close());
  const redis = await createRedisClient(`redis://${proxy.address}`);
  t.teardown(() => redis.disconnect());
  const limiter = new RedisModelLimiter({ client: redis, keyPrefix: keyPrefix(), timeoutMs: 500, insurance: 'none' });
  const keyId = newKeyId();
  proxy.stall();
  const consumed = limiter.consume(keyId, { requestsPerMinute: 5 });
  block(600);
  // Redis gets the call one turn of the loop after it went out: after a timer that had started
  // with the call has fired, well within the 500 ms counted from the sending.
  setImmediate(() => setImmediate(() => proxy.resume()));
  t.like(await consumed, { allowed: true, requests: { remaining: 4 } });
});
