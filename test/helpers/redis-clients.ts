import { randomBytes } from 'node:crypto';
import type { TestFn } from 'ava';
import type { Redis } from 'ioredis';
import { createRedisClient } from '../../lib/stores/redis/client.js';
import { REDIS_URL } from './services.js';

/**
 * Clients on the shared test Redis, as server processes would have, disconnected after the file's
 * tests; and key prefixes of their own, so test files and tests never share counters.
 */
export function redisClients(test: TestFn): { client(): Promise<Redis>; keyPrefix(): string } {
  const clients: Redis[] = [];
  test.after.always(() => {
    for (const client of clients) client.disconnect();
  });
  return {
    async client() {
      const redis = await createRedisClient(REDIS_URL);
      clients.push(redis);
      return redis;
    },
    keyPrefix: () => `kmg-test:${randomBytes(6).toString('hex')}`,
  };
}
