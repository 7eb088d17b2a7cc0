import { randomBytes } from 'node:crypto';
import test from 'ava';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { KnexKeyChanges } from '../../lib/stores/knex/key-changes.js';
import { MemoryKeyChanges } from '../../lib/stores/memory/key-changes.js';
import { createRedisClient } from '../../lib/stores/redis/client.js';
import { RedisKeyChanges } from '../../lib/stores/redis/key-changes.js';
import { keyChangesContract, recorder } from '../../lib/testing/key-changes-contract.js';
import { REDIS_URL, postgresDatabase, sqliteDatabase, withPostgres, withRedis, type TestDatabase } from '../helpers/services.js';

const cleanups: Array<() => Promise<unknown> | unknown> = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

keyChangesContract(test, 'memory', async () => {
  const changes = new MemoryKeyChanges();
  return { publisher: changes, subscriber: changes, carriesIds: true };
});

async function knexPair(open: () => Promise<TestDatabase>) {
  const db = await open();
  cleanups.push(() => db.destroy());
  await migrate(db.knex);
  // Two instances on one database, as two processes hold them.
  const subscriber = new KnexKeyChanges(db.knex, { intervalMs: 20 });
  cleanups.push(() => subscriber.close());
  return { publisher: new KnexKeyChanges(db.knex), subscriber, carriesIds: false };
}
keyChangesContract(test, 'sqlite', () => knexPair(sqliteDatabase));
keyChangesContract(withPostgres(test), 'postgres', () => knexPair(postgresDatabase));

async function redisChanges(channel: string, connectionName?: string) {
  const client = await createRedisClient(REDIS_URL, connectionName === undefined ? {} : { connectionName });
  const changes = new RedisKeyChanges({ client, channel });
  cleanups.push(() => client.quit(), () => changes.close());
  return { client, changes };
}
keyChangesContract(withRedis(test), 'redis', async () => {
  const channel = `kmg-test:${randomBytes(6).toString('hex')}`;
  const [publisher, subscriber] = await Promise.all([redisChanges(channel), redisChanges(channel)]);
  return { publisher: publisher.changes, subscriber: subscriber.changes, carriesIds: true };
});

withRedis(test)('redis: when the listening connection was cut, the listeners hear "anything may have changed" once it listens again', async (t) => {
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

test('KnexKeyChanges refuses an interval that is not a positive number', (t) => {
  t.throws(() => new KnexKeyChanges({} as never, { intervalMs: 0 }), { message: /intervalMs/ });
});

test('RedisKeyChanges refuses a timeoutMs that is not a positive number', (t) => {
  const client = { publish: () => undefined } as never;
  for (const timeoutMs of [0, -1, Number.NaN]) t.throws(() => new RedisKeyChanges({ client, timeoutMs }), { instanceOf: TypeError, message: /timeoutMs/ });
});
