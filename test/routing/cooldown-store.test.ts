import { randomBytes } from 'node:crypto';
import test from 'ava';
import { MemoryCooldownStore } from '../../lib/models/routing/cooldown-store.js';
import { createRedisClient } from '../../lib/stores/redis/client.js';
import { RedisCooldownStore } from '../../lib/stores/redis/cooldown-store.js';
import { REDIS_URL, withRedis } from '../helpers/services.js';
import { cooldownStoreContract } from '../../lib/testing/cooldown-store-contract.js';

cooldownStoreContract(test, 'MemoryCooldownStore', async () => new MemoryCooldownStore());

const redisClients: Array<{ quit(): Promise<unknown> }> = [];
test.after.always(() => Promise.all(redisClients.map((client) => client.quit())));
cooldownStoreContract(withRedis(test), 'RedisCooldownStore', async () => {
  const client = await createRedisClient(REDIS_URL);
  redisClients.push(client);
  return new RedisCooldownStore({ client, keyPrefix: `kmg-test:${randomBytes(6).toString('hex')}` });
});
