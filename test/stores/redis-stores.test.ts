import { randomBytes } from 'node:crypto';
import test from 'ava';
import { createRedisClient } from '../../lib/stores/redis/client.js';
import { RedisAlertClaims } from '../../lib/stores/redis/alert-claims.js';
import { RedisCooldownStore } from '../../lib/stores/redis/cooldown-store.js';
import { RedisCreationLimiter } from '../../lib/stores/redis/creation-limiter.js';
import { RedisKeyChanges } from '../../lib/stores/redis/key-changes.js';
import { RedisModelLimiter } from '../../lib/stores/redis/model-limiter.js';
import { RedisSpendLedger } from '../../lib/stores/redis/spend-ledger.js';
import { alertClaimsContract } from '../../lib/testing/alert-claims-contract.js';
import { cooldownStoreContract } from '../../lib/testing/cooldown-store-contract.js';
import { creationLimiterContract } from '../../lib/testing/creation-limiter-contract.js';
import { keyChangesContract, recorder } from '../../lib/testing/key-changes-contract.js';
import { modelLimiterContract } from '../../lib/testing/model-limiter-contract.js';
import { spendLedgerContract } from '../../lib/testing/spend-ledger-contract.js';
import { redisClients } from '../helpers/redis-clients.js';
import { REDIS_URL, withRedis } from '../helpers/services.js';

// Every store family's contract on its Redis store (lib/stores/redis), each store on a key prefix
// of its own; what two processes sharing Redis see is tested beside each family's other tests.

const redisTest = withRedis(test);
const { client, keyPrefix } = redisClients(test);
const cleanups: Array<() => Promise<unknown> | unknown> = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

// The limiters' tests that count give Redis 5 s, not the default 500 ms: dozens of them run at once
// in this file, and a machine busy with the rest of the suite must not fail them by the clock. The
// bound itself is tested in test/quota/limiters.test.ts.
const COUNTING_TIMEOUT_MS = 5000;

creationLimiterContract(
  redisTest,
  'RedisCreationLimiter',
  async (options) => new RedisCreationLimiter({ client: await client(), keyPrefix: keyPrefix(), timeoutMs: COUNTING_TIMEOUT_MS, ...options }),
);
modelLimiterContract(
  redisTest,
  'RedisModelLimiter',
  async (clock) => new RedisModelLimiter({ client: await client(), keyPrefix: keyPrefix(), nowMs: clock, timeoutMs: COUNTING_TIMEOUT_MS }),
);
spendLedgerContract(
  redisTest,
  'RedisSpendLedger',
  async (nowMs, spentBefore) => new RedisSpendLedger({ client: await client(), keyPrefix: keyPrefix(), nowMs, spentBefore }),
);
cooldownStoreContract(redisTest, 'RedisCooldownStore', async () => new RedisCooldownStore({ client: await client(), keyPrefix: keyPrefix() }));
alertClaimsContract(redisTest, 'RedisAlertClaims', async () => new RedisAlertClaims({ client: await client(), keyPrefix: keyPrefix() }));

// Key changes: pub/sub, on a channel of the test's own.

async function redisChanges(channel: string, connectionName?: string) {
  const changesClient = await createRedisClient(REDIS_URL, connectionName === undefined ? {} : { connectionName });
  const changes = new RedisKeyChanges({ client: changesClient, channel });
  cleanups.push(
    () => changesClient.quit(),
    () => changes.close(),
  );
  return { client: changesClient, changes };
}

keyChangesContract(redisTest, 'RedisKeyChanges', async () => {
  const channel = `kmg-test:${randomBytes(6).toString('hex')}`;
  const [publisher, subscriber] = await Promise.all([redisChanges(channel), redisChanges(channel)]);
  return { publisher: publisher.changes, subscriber: subscriber.changes, carriesIds: true };
});

redisTest('redis: when the listening connection was cut, the listeners hear "anything may have changed" once it listens again', async (t) => {
  const name = `kmg-test-${randomBytes(6).toString('hex')}`;
  const { client, changes } = await redisChanges(`kmg-test:${name}`, name);
  const { heard, listener, calls } = recorder();
  t.teardown(changes.subscribe(listener));
  await calls(1);
  // The duplicate carries the same connection name; the publishing client is not subscribed.
  const clients = (await client.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string;
  const id = /id=(\d+) .*name=(\S+)/.exec(clients.split('\n').find((line) => line.includes(`name=${name}`)) ?? '')?.[1];
  t.truthy(id);
  await client.call('CLIENT', 'KILL', 'ID', id as string);
  await calls(2);
  t.deepEqual(heard, [undefined, undefined]);
  // The message may be handled before the answer to PUBLISH: calls() counts what was heard already.
  await client.publish(`kmg-test:${name}`, 'key_after');
  await calls(3);
  t.is(heard[2], 'key_after');
});

test('RedisKeyChanges refuses a timeoutMs that is not a positive number', (t) => {
  const client = { publish: () => undefined } as never;
  for (const timeoutMs of [0, -1, Number.NaN]) t.throws(() => new RedisKeyChanges({ client, timeoutMs }), { instanceOf: TypeError, message: /timeoutMs/ });
});
