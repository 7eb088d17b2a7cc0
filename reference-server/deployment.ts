import { constants } from 'node:fs';
import { access, mkdir } from 'node:fs/promises';
import type { Redis } from 'ioredis';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { AdminSessionStore } from '../lib/admin/admin-session-store.js';
import type { AdminTokenStore } from '../lib/admin/admin-token-store.js';
import { cachedKeyStore } from '../lib/auth/cached-key-store.js';
import { announceKeyChanges, type KeyChanges } from '../lib/auth/key-changes.js';
import type { KeyStore } from '../lib/auth/key-store.js';
import type { BlobStore } from '../lib/files/blob-store.js';
import type { FileStore } from '../lib/files/file-store.js';
import { sweep } from '../lib/files/sweep.js';
import type { CreationLimiter } from '../lib/quota/creation-limiter.js';
import type { CreationLimitsOptions, CreationUsage } from '../lib/quota/creation-limits.js';
import { MemoryCreationLimiter } from '../lib/quota/memory-creation-limiter.js';
import { FsBlobStore } from '../lib/stores/fs/blob-store.js';
import { KnexAdminSessionStore } from '../lib/stores/knex/admin-session-store.js';
import { KnexAdminTokenStore } from '../lib/stores/knex/admin-token-store.js';
import { KnexFileStore } from '../lib/stores/knex/file-store.js';
import { KnexKeyChanges } from '../lib/stores/knex/key-changes.js';
import { KnexKeyStore } from '../lib/stores/knex/key-store.js';
import { ConfigError } from './config-error.js';
import type { ServerConfig } from './config.js';
import { openMigratedDatabase, type DatabaseLog } from './database.js';
import type { ReadinessCheck } from './health.js';
import { removeStaleUploads } from './stale-uploads.js';
import type { SweepReport } from './sweeper.js';

/** Every backing service of one server process, opened from the configuration. */
export interface Deployment {
  config: ServerConfig;
  knex: Knex;
  /** Cached, and announcing every revocation and change on `keyChanges`. */
  keys: KeyStore;
  files: FileStore;
  blobs: BlobStore;
  adminTokens: AdminTokenStore;
  adminSessions: AdminSessionStore;
  limiter: CreationLimiter & { usage(account: string): Promise<CreationUsage> };
  /** Set when REDIS_URL is. */
  redis: Redis | null;
  /** What `/readyz` asks. */
  checks: Record<string, ReadinessCheck>;
  /** Closes the pools and clients; the process can then exit. */
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
    adminTokens: new KnexAdminTokenStore(knex),
    adminSessions: new KnexAdminSessionStore(knex),
  };
}

/**
 * How key revocations and changes reach every process: Redis pub/sub when there is Redis, else
 * a version row on the database that each server reads every 250 ms.
 */
export async function openKeyChanges(knex: Knex, redis: Redis | null): Promise<KeyChanges & { close(): unknown }> {
  if (!redis) return new KnexKeyChanges(knex);
  const { RedisKeyChanges } = await import('../lib/stores/redis/key-changes.js');
  return new RedisKeyChanges({ client: redis });
}

/** One sweep of this deployment: expired files and orphaned blobs (lib's `sweep`), and stale upload temp files. */
export async function sweepDeployment(config: ServerConfig, stores: { files: FileStore; blobs: BlobStore }): Promise<SweepReport> {
  const result = await sweep({ ...stores, orphanGraceSeconds: config.gateway.sweep.orphanGraceSeconds });
  return { ...result, staleUploads: await removeStaleUploads(config.uploadsDir) };
}

/** The Redis client for the limits; unreachable at start-up is a start-up failure. */
async function openRedis(url: string, logger: Logger): Promise<Redis> {
  // Loaded only when configured: ioredis adds 9 to 12 MiB to a server's idle RSS (BENCHMARKS.md).
  const { createRedisClient } = await import('../lib/stores/redis/client.js');
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
    if (!down) logger.warn({ err: err.message }, 'redis unreachable: file creation answers 503 until it is back');
    down = true;
  });
  redis.on('ready', () => {
    if (down) logger.info('redis is back');
    down = false;
  });
  return redis;
}

/** The creation limits on Redis when there is one, else in this process's memory. */
async function creationLimiter(redis: Redis | null, rates: CreationLimitsOptions): Promise<Deployment['limiter']> {
  if (!redis) return new MemoryCreationLimiter(rates);
  const { RedisCreationLimiter } = await import('../lib/stores/redis/creation-limiter.js');
  return new RedisCreationLimiter({ client: redis, ...rates });
}

/**
 * Opens the database (migrated), the files directory and, with REDIS_URL, Redis; the key store is
 * behind a `cachedKeyStore` of `keyCacheSeconds` that forgets a key as soon as any process
 * announces a change to it (`openKeyChanges`). A backing service that cannot be reached is a
 * `ConfigError`: the server does not start without it.
 */
export async function openDeployment(config: ServerConfig, logger: Logger): Promise<Deployment> {
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
  const { keyCacheSeconds } = config.gateway;
  const keyChanges = await openKeyChanges(knex, redis);
  const keys = announceKeyChanges(stores.keys, keyChanges);
  return {
    config,
    ...stores,
    // Only the serving process caches: the CLI reads and writes the database directly, and announces.
    keys: keyCacheSeconds > 0 ? cachedKeyStore(keys, { ttlMs: keyCacheSeconds * 1000, changes: keyChanges }) : keys,
    limiter,
    redis,
    checks,
    async close() {
      await keyChanges.close();
      await redis?.quit().catch(() => redis?.disconnect());
      await knex.destroy();
    },
  };
}
