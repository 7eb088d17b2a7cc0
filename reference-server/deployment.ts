import { constants } from 'node:fs';
import { access, mkdir } from 'node:fs/promises';
import type { Redis } from 'ioredis';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import {
  MemoryCreationLimiter,
  MemoryModelLimiter,
  cachedKeyStore,
  sweep,
  usageRecorder,
  type BlobStore,
  type CreationLimiter,
  type CreationLimitsOptions,
  type FileStore,
  type KeyStore,
  type ModelLimiter,
  type Provider,
  type UsageRecorder,
} from 'koa-model-gateway';
import { FsBlobStore } from 'koa-model-gateway/stores/fs';
import { KnexFileStore, KnexKeyStore, KnexUsageStore } from 'koa-model-gateway/stores/knex';
import { ConfigError } from './config-error.js';
import { configuredProviders, type ServerConfig } from './config.js';
import { openMigratedDatabase, type DatabaseLog } from './database.js';
import type { ReadinessCheck } from './health.js';
import { openMetrics, type ServerMetrics } from './metrics.js';
import { removeStaleUploads } from './stale-uploads.js';
import type { SweepReport } from './sweeper.js';

/** Every backing service of one server process, opened from the configuration. */
export interface Deployment {
  config: ServerConfig;
  knex: Knex;
  keys: KeyStore;
  files: FileStore;
  blobs: BlobStore;
  limiter: CreationLimiter;
  /** Every key's model calls, counted against its limits. */
  modelLimiter: ModelLimiter;
  /** One record per model call, written to the database in batches. */
  usage: UsageRecorder;
  /** Set when METRICS_PORT is: what the app feeds and the metrics listener serves. */
  metrics: ServerMetrics | null;
  /** The model providers, their credentials read from the environment. */
  providers: Provider[];
  /** Set when REDIS_URL is. */
  redis: Redis | null;
  /** What `/readyz` asks. */
  checks: Record<string, ReadinessCheck>;
  /** Writes the usage records still waiting, then closes the pools and clients; the process can then exit. */
  close(): Promise<void>;
}

/** The stores on the database and the files directory: what the server and the `sweep` command share. */
export async function openStores(config: ServerConfig, log?: DatabaseLog) {
  for (const dir of [config.filesDir, config.uploadsDir]) {
    try {
      await mkdir(dir, { recursive: true });
    } catch (err) {
      throw new ConfigError(`cannot create the directory ${dir} (${(err as NodeJS.ErrnoException).code})`);
    }
  }
  const knex = await openMigratedDatabase(config.database, log);
  return {
    knex,
    keys: new KnexKeyStore(knex),
    files: new KnexFileStore(knex),
    blobs: new FsBlobStore({ directory: config.filesDir }),
  };
}

/** One sweep of this deployment: expired files and orphaned blobs (lib's `sweep`), and stale upload temp files. */
export async function sweepDeployment(config: ServerConfig, stores: { files: FileStore; blobs: BlobStore }): Promise<SweepReport> {
  const result = await sweep({ ...stores, orphanGraceSeconds: config.gateway.sweep.orphanGraceSeconds });
  return { ...result, staleUploads: await removeStaleUploads(config.uploadsDir) };
}

/** The Redis client for the limits; unreachable at start-up is a start-up failure. */
async function openRedis(url: string, logger: Logger): Promise<Redis> {
  // Loaded only when configured: ioredis adds 9 to 12 MiB to a server's idle RSS (BENCHMARKS.md).
  const { createRedisClient } = await import('koa-model-gateway/stores/redis');
  let redis: Redis;
  try {
    redis = await createRedisClient(url);
  } catch (err) {
    const cause = (err as Error).cause as NodeJS.ErrnoException | undefined;
    const reason = cause?.code ?? cause?.message ?? (err as Error).message;
    const { host } = new URL(url);
    throw new ConfigError(`cannot reach Redis at ${host} (${reason})`);
  }
  // ioredis reports every failed reconnect: log the transitions only.
  let down = false;
  redis.on('error', (err: Error) => {
    if (!down) logger.warn({ err: err.message }, 'redis unreachable: file creations and model calls answer 503 until it is back');
    down = true;
  });
  redis.on('ready', () => {
    if (down) logger.info('redis is back');
    down = false;
  });
  return redis;
}

/** The creation limits on Redis when there is one, else in this process's memory. */
async function creationLimiter(redis: Redis | null, rates: CreationLimitsOptions): Promise<CreationLimiter> {
  if (!redis) return new MemoryCreationLimiter(rates);
  const { RedisCreationLimiter } = await import('koa-model-gateway/stores/redis');
  return new RedisCreationLimiter({ client: redis, ...rates });
}

/** The model-call limits on Redis when there is one, else in this process's memory. */
async function modelLimiter(redis: Redis | null): Promise<ModelLimiter> {
  if (!redis) return new MemoryModelLimiter();
  const { RedisModelLimiter } = await import('koa-model-gateway/stores/redis');
  return new RedisModelLimiter({ client: redis });
}

/**
 * Makes the providers (their credentials read from the environment), then opens the database
 * (migrated), the files directory and, with REDIS_URL, Redis (the creation and model-call limits
 * then live there), the usage recorder and, with METRICS_PORT, the metrics; the key store is
 * behind a `cachedKeyStore` of `keyCacheSeconds`. A credential that is not set, or a backing service that
 * cannot be reached, is a `ConfigError`: the server does not start without it.
 */
export async function openDeployment(config: ServerConfig, logger: Logger): Promise<Deployment> {
  const providers = configuredProviders(config);
  const stores = await openStores(config, (level, message) => logger[level]({ component: 'knex' }, message));
  const { knex } = stores;
  const rates = {
    createsPerMinute: config.gateway.limits.createsPerMinute,
    createsPerDay: config.gateway.limits.createsPerDay,
    bytesPerDay: config.gateway.limits.bytesPerDay,
  };
  let redis: Redis | null = null;
  try {
    if (config.redisUrl !== null) redis = await openRedis(config.redisUrl, logger);
  } catch (err) {
    await knex.destroy();
    throw err;
  }
  const checks: Record<string, ReadinessCheck> = {
    database: () => knex.raw('select 1'),
    blobs: () => access(config.filesDir, constants.R_OK | constants.W_OK),
  };
  if (redis) checks.redis = () => (redis as Redis).ping();
  const limiter = await creationLimiter(redis, rates);
  const usage = usageRecorder({
    store: new KnexUsageStore(knex),
    onError: (err) => logger.warn({ err }, 'usage records'),
  });
  const { keyCacheSeconds } = config.gateway;
  return {
    config,
    ...stores,
    // Only the serving process caches: the CLI reads and revokes in the database directly.
    keys: keyCacheSeconds > 0 ? cachedKeyStore(stores.keys, { ttlMs: keyCacheSeconds * 1000 }) : stores.keys,
    limiter,
    modelLimiter: await modelLimiter(redis),
    usage,
    metrics: await openMetrics(config),
    providers,
    redis,
    checks,
    async close() {
      // After the HTTP server has closed: every call has its record by then.
      await usage.close();
      await redis?.quit().catch(() => redis?.disconnect());
      await knex.destroy();
    },
  };
}
