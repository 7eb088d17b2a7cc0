import test from 'ava';
import { Redis } from 'ioredis';
import { RedisCreationLimiter, type RedisCreationLimiterOptions } from '../../lib/stores/redis/creation-limiter.js';
import { creationLimiterContract, newAccount, testClock } from '../../lib/testing/creation-limiter-contract.js';
import { redisClients } from '../helpers/redis-clients.js';
import { REDIS_URL, withRedis } from '../helpers/services.js';

const { client, keyPrefix } = redisClients(test);

async function limiter(options: Omit<RedisCreationLimiterOptions, 'client'> = {}): Promise<RedisCreationLimiter> {
  return new RedisCreationLimiter({ client: await client(), keyPrefix: keyPrefix(), ...options });
}

const redisTest = withRedis(test);

creationLimiterContract(redisTest, 'redis', (options) => limiter(options));

redisTest('two processes sharing Redis: 50 parallel reservations in one minute, exactly 10 pass', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const shared = { keyPrefix: keyPrefix(), nowMs: time.nowMs };
  // Two clients, as two server processes would have.
  const processes = [
    new RedisCreationLimiter({ client: await client(), ...shared }),
    new RedisCreationLimiter({ client: await client(), ...shared }),
  ];
  const account = newAccount();
  const results = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => processes[i % 2]?.reserve(account, 100)));
  t.is(results.filter((result) => result.status === 'fulfilled').length, 10);
  for (const each of processes) t.deepEqual(await each.usage(account), { createsThisMinute: 10, createsToday: 10, bytesToday: 1000 });
});

redisTest('two processes sharing Redis hold the day totals exactly', async (t) => {
  const time = testClock('2030-01-15T12:00:00.000Z');
  const shared = { keyPrefix: keyPrefix(), nowMs: time.nowMs, createsPerMinute: 1000, createsPerDay: 30, bytesPerDay: 2000 };
  const processes = [
    new RedisCreationLimiter({ client: await client(), ...shared }),
    new RedisCreationLimiter({ client: await client(), ...shared }),
  ];
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
  const limiter = new RedisCreationLimiter({ client: redis, keyPrefix: prefix, nowMs: time.nowMs });
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
  const limiter = new RedisCreationLimiter({ client: redis, keyPrefix: prefix, nowMs: time.nowMs });
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

test('Redis options are checked at start-up', (t) => {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, enableOfflineQueue: false });
  for (const bad of [{ keyPrefix: '' }, { timeoutMs: 0 }, { insurance: 'disk' as 'memory' }, { createsPerDay: 0 }]) {
    t.throws(() => new RedisCreationLimiter({ client: redis, ...bad }), { instanceOf: TypeError, message: /^koa-model-gateway: / });
  }
});
