/**
 * File creation limits kept in Redis, so that every process of a deployment counts against the
 * same per-account minute and UTC-day budgets. Run it twice, on two ports: the limits are shared.
 * While Redis is away, uploads get 503 (fail closed); `insurance: 'memory'` would fall back to
 * per-process limits instead. Files and keys stay in memory here, to keep the example short.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 node --conditions=@koa-model-gateway/source --import tsx examples/redis-limits.ts
 *
 * The demo key belongs to account DEMO_ACCOUNT (default `demo`): a second process prints a key of
 * its own for the same account.
 */
import Koa from 'koa';
import { apiKey, gatewayErrors } from 'koa-model-gateway';
import { createApiKey } from 'koa-model-gateway/auth';
import { filesRouter } from 'koa-model-gateway/files';
import { MemoryBlobStore, MemoryFileStore, MemoryKeyStore } from 'koa-model-gateway/stores/memory';
import { RedisCreationLimiter, createRedisClient } from 'koa-model-gateway/stores/redis';

// Fails fast: resolves once Redis is ready, and commands fail at once while it is away.
const redis = await createRedisClient(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
redis.on('error', (err: Error) => console.error(`redis: ${err.message}`));
const creationLimiter = new RedisCreationLimiter({
  client: redis,
  createsPerMinute: 10,
  createsPerDay: 1000,
  bytesPerDay: 1_073_741_824,
});

const keys = new MemoryKeyStore();
const endpoints = filesRouter({ files: new MemoryFileStore(), blobs: new MemoryBlobStore(), creationLimiter });
const app = new Koa();
app.use(gatewayErrors());
app.use(apiKey({ store: keys }));
app.use(endpoints.routes());
app.use(endpoints.allowedMethods());

const { key } = await createApiKey(keys, {
  prefix: 'kmg',
  account: process.env.DEMO_ACCOUNT ?? 'demo',
  scopes: ['files:write', 'files:read', 'files:delete'],
});
const server = app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 3000;
  console.log(`Listening on http://127.0.0.1:${port}`);
  console.log(`API key: ${key}`);
});
process.once('SIGTERM', () => server.close(() => void redis.quit()));
