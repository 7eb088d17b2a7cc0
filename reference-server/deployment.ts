import { mkdir } from 'node:fs/promises';
import type { Redis } from 'ioredis';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { announceKeyChanges, cachedKeyStore, keyUseRecorder, type KeyChanges, type KeyStore, type KeyUseRecorder } from 'koa-model-gateway/auth';
import { sweep, type BlobStore, type FileStore } from 'koa-model-gateway/files';
import type { CreationLimiter, CreationLimitsOptions, CreationUsage, ModelLimiter } from 'koa-model-gateway/quota';
import type { CooldownStore, Provider, ResponseCache } from 'koa-model-gateway/models';
import { pruneUsage, usageRecorder, type UsageRecorder, type UsageStore } from 'koa-model-gateway/usage';
import {
  MemoryAlertClaims,
  MemorySpendLedger,
  cachedAccountBudgets,
  priceCatalog,
  spendBudgets,
  spendFromUsage,
  webhookNotifier,
  type AccountBudgetStore,
  type SpendBudgets,
  type SpendBudgetsOptions,
  type SpendLedger,
} from 'koa-model-gateway/cost';
import { auditEntry, type AuditStore, type AdminSessionStore, type AdminTokenStore, type AdminUserStore } from 'koa-model-gateway/admin';
import {
  KnexAccountBudgetStore,
  KnexAuditStore,
  KnexAdminSessionStore,
  KnexAdminTokenStore,
  KnexAdminUserStore,
  KnexFileStore,
  KnexKeyChanges,
  KnexKeyStore,
  KnexMcpCallStore,
  KnexMcpGrantStore,
  KnexUsageStore,
} from 'koa-model-gateway/stores/knex';
import { MemoryCooldownStore, MemoryCreationLimiter, MemoryModelLimiter, MemoryResponseCache } from 'koa-model-gateway/stores/memory';
// Types only: the MCP SDK is loaded when the config file names a server.
import type { McpCallRecord, McpCallStore, McpGrantStore, McpUpstream } from 'koa-model-gateway/mcp';
import type * as McpLibrary from 'koa-model-gateway/mcp';
import { openBlobStore } from './blob-config.js';
import { ConfigError } from './config-error.js';
import { configuredProviders, type ServerConfig } from './config.js';
import { openMigratedDatabase, type DatabaseLog, type DatabaseOptions } from './database.js';
import { OutageLog } from './outage-log.js';
import type { ReadinessCheck } from './health.js';
import { configuredMcpUpstreams } from './mcp-config.js';
import { openMetrics, type ServerMetrics } from './metrics.js';
import { missingPackages } from './peers.js';
import { claimUploadsDir, removeStaleUploads } from './stale-uploads.js';
import type { SweepReport } from './sweeper.js';
import { startTracing, tracingPackages, type ServerTracing } from './tracing.js';

/** Where `mcpGateway()`'s records go: written at once, never awaited by the request; a failed write is logged. */
export interface McpCallRecorder {
  record(record: McpCallRecord): void;
  /** Resolves once every write under way has ended; records after it are dropped. */
  close(): Promise<void>;
}

function mcpCallRecorder(store: McpCallStore, logger: Logger): McpCallRecorder {
  const writing = new Set<Promise<void>>();
  let closed = false;
  return {
    record(record) {
      if (closed) return;
      const write = store.insert([record]).catch((err: unknown) => logger.warn({ err }, 'MCP usage record lost'));
      writing.add(write);
      void write.finally(() => writing.delete(write));
    },
    async close() {
      closed = true;
      await Promise.all(writing);
    },
  };
}

/** How often a server's SQLite WAL is checkpointed by its writer thread, which writes the usage records too. */
const WAL_CHECKPOINT_MS = 1000;

/** Every backing service of one server process, opened from the configuration. */
export interface Deployment {
  config: ServerConfig;
  /** The server's clock: what the limits, budgets, usage records, files' and keys' expiry and the admin API's reports count by. Default: `Date.now`. */
  nowMs: () => number;
  knex: Knex;
  keys: KeyStore;
  files: FileStore;
  blobs: BlobStore;
  adminTokens: AdminTokenStore;
  adminSessions: AdminSessionStore;
  /** The people who signed in through the OIDC provider. */
  adminUsers: AdminUserStore;
  /** `usage` gives the admin API an account's figures. */
  creationLimiter: CreationLimiter & { usage(account: string): Promise<CreationUsage> };
  /** Every key's model calls, counted against its limits. */
  modelLimiter: ModelLimiter;
  /** What failed model calls taught of their deployments: shared through Redis when there is one, else in this process's memory. */
  cooldowns: CooldownStore;
  /** The model calls' answers kept by the response cache: shared through Redis when there is one, else in this process's memory. */
  responseCache: ResponseCache;
  /** The accounts' budgets in money, as the admin API sets them. */
  accountBudgets: AccountBudgetStore;
  /** The admin actions, recorded by the admin API and the command line. */
  audit: AuditStore;
  /** The accounts' MCP grants, as the admin API and the CLI set them. */
  mcpGrants: McpGrantStore;
  /** One record per MCP tools/call. */
  mcpCalls: McpCallStore;
  /** Writes each MCP tools/call's record off the request's path; `close` waits for the writes under way. */
  mcpCallRecorder: McpCallRecorder;
  /** With `mcpServers` in the config file: the servers and the SDK's gateway (loaded only then). */
  mcp: { upstreams: McpUpstream[]; library: typeof McpLibrary } | null;
  /** The keys' and accounts' budgets, on the spend shared through Redis when there is one, else in this process's memory. */
  budgets: SpendBudgets;
  /** The ledger `budgets` count on: the admin API reads what calls under way hold from it. */
  spendLedger: SpendLedger;
  /** One record per model call, written to the database in batches. */
  usageRecorder: UsageRecorder;
  /** Each key's last use, written at most once a minute per key, off the request path. */
  keyUses: KeyUseRecorder;
  /** Where `usage` writes, and the admin API reads its reports. */
  usageStore: UsageStore;
  /** Set when METRICS_PORT is: what the app feeds and the metrics listener serves. */
  metrics: ServerMetrics | null;
  /** Set when the OTEL_* environment turns traces on (`startTracing`). */
  tracing: ServerTracing | null;
  /** The model providers, their credentials read from the environment. */
  providers: Provider[];
  /** The configured models, each with its price: its own, else the price table's (`priceCatalog()`); none when neither has one. */
  catalog: ServerConfig['gateway']['models'];
  /** Set when REDIS_URL is. */
  redis: Redis | null;
  /** What `/readyz` asks. */
  checks: Record<string, ReadinessCheck>;
  /** Where the stores' outages are logged (`logAppError`'s). */
  outages: OutageLog;
  /** This process's own directory in `config.uploadsDir`, where its uploads are streamed (`claimUploadsDir`). */
  tempDir: string;
  /** Writes the usage records still waiting, then releases the uploads claim (removing `tempDir`), Redis, the database, the traces (their last spans exported) and the providers' connections; the process can then exit. */
  close(): Promise<void>;
}

/**
 * The stores on the database and the files directory or bucket: what the server and the `sweep`
 * command share. `close` closes the database pool and the blob store's client.
 */
export async function openStores(config: ServerConfig, options: DatabaseOptions = {}) {
  for (const dir of config.s3 ? [config.uploadsDir] : [config.filesDir, config.uploadsDir]) {
    try {
      await mkdir(dir, { recursive: true });
    } catch (err) {
      throw new ConfigError(`cannot create the directory ${dir} (${(err as NodeJS.ErrnoException).code})`);
    }
  }
  const database = await openMigratedDatabase(config.database, options);
  const { knex, storeOptions } = database;
  let blobs;
  try {
    blobs = await openBlobStore(config);
  } catch (err) {
    await database.close();
    throw err;
  }
  return {
    knex,
    keys: new KnexKeyStore(knex, storeOptions),
    files: new KnexFileStore(knex, storeOptions),
    blobs: blobs.blobs,
    blobsReady: blobs.ready,
    adminTokens: new KnexAdminTokenStore(knex, storeOptions),
    adminSessions: new KnexAdminSessionStore(knex, storeOptions),
    adminUsers: new KnexAdminUserStore(knex, storeOptions),
    usageStore: new KnexUsageStore(knex, storeOptions),
    accountBudgets: new KnexAccountBudgetStore(knex, storeOptions),
    audit: new KnexAuditStore(knex, storeOptions),
    mcpGrants: new KnexMcpGrantStore(knex, storeOptions),
    mcpCalls: new KnexMcpCallStore(knex, storeOptions),
    async close() {
      blobs.close();
      await database.close();
    },
  };
}

/**
 * How key revocations and changes reach every process: Redis pub/sub when there is Redis, else
 * a version row on the database that each server reads every 250 ms.
 */
export async function openKeyChanges(knex: Knex, redis: Redis | null): Promise<KeyChanges & { close(): unknown }> {
  if (!redis) return new KnexKeyChanges(knex);
  const { RedisKeyChanges } = await import('koa-model-gateway/stores/redis');
  return new RedisKeyChanges({ client: redis });
}

/**
 * One sweep of this deployment: expired files and orphaned blobs (lib's `sweep`), the temp files of
 * uploads whose process died, and the usage records and roll-ups past their retention (`pruneUsage`).
 */
export async function sweepDeployment(config: ServerConfig, stores: { files: FileStore; blobs: BlobStore; usageStore: UsageStore }): Promise<SweepReport> {
  const result = await sweep({ files: stores.files, blobs: stores.blobs, orphanGraceSeconds: config.gateway.sweep.orphanGraceSeconds });
  const staleUploads = await removeStaleUploads(config.uploadsDir);
  return { ...result, staleUploads, usageRows: await pruneUsage(stores.usageStore, config.usageRetention) };
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
async function creationLimiter(redis: Redis | null, rates: CreationLimitsOptions): Promise<Deployment['creationLimiter']> {
  if (!redis) return new MemoryCreationLimiter(rates);
  const { RedisCreationLimiter } = await import('koa-model-gateway/stores/redis');
  return new RedisCreationLimiter({ client: redis, ...rates });
}

/** The model-call limits on Redis when there is one, else in this process's memory. */
async function cooldownStore(redis: Redis | null): Promise<CooldownStore> {
  if (!redis) return new MemoryCooldownStore();
  const { RedisCooldownStore } = await import('koa-model-gateway/stores/redis');
  return new RedisCooldownStore({ client: redis });
}

/** The response cache on Redis when there is one (every instance serves what one stored), else in this process's memory. */
async function responseCache(redis: Redis | null): Promise<ResponseCache> {
  if (!redis) return new MemoryResponseCache();
  const { RedisResponseCache } = await import('koa-model-gateway/stores/redis');
  return new RedisResponseCache({ client: redis });
}

async function modelLimiter(redis: Redis | null, nowMs: () => number): Promise<ModelLimiter> {
  if (!redis) return new MemoryModelLimiter({ nowMs });
  const { RedisModelLimiter } = await import('koa-model-gateway/stores/redis');
  return new RedisModelLimiter({ client: redis, nowMs });
}

/** Where spend is counted against the budgets: Redis when there is one, else this process's memory. */
async function spendLedger(redis: Redis | null, nowMs: () => number, store: UsageStore, recorder: UsageRecorder, keys: KeyStore): Promise<SpendLedger> {
  // What the usage records hold counts from the first call: a restart, a Redis that lost its
  // data or a budget set on a key that had spent already forgets nothing written. This process's
  // records still queued are written first, so that a budget set just after its calls counts them.
  // A key's spend is that of its line of rotations: the records of every key of it.
  const fromUsage = spendFromUsage(store, keys);
  const spentBefore = async (party: string, at: number) => {
    await recorder.flush();
    return fromUsage(party, at);
  };
  if (!redis) return new MemorySpendLedger({ nowMs, spentBefore });
  const { RedisSpendLedger } = await import('koa-model-gateway/stores/redis');
  return new RedisSpendLedger({ client: redis, nowMs, spentBefore });
}

/**
 * Budget alerts, when a webhook is configured (ALERT_WEBHOOK_URL, the file's `alerts.webhooks`):
 * signed with ALERT_WEBHOOK_SECRET, once per threshold per period across instances (Redis when
 * there is one, else this process's memory), each delivery or failure logged.
 */
async function budgetAlerts(
  config: ServerConfig,
  redis: Redis | null,
  logger: Logger,
  nowMs: () => number,
  audit: AuditStore,
): Promise<Pick<SpendBudgetsOptions, 'alerts'>> {
  const fromEnv = config.env.ALERT_WEBHOOK_URL ? [{ url: config.env.ALERT_WEBHOOK_URL, format: 'generic' as const }] : [];
  const webhooks = [...fromEnv, ...config.gateway.alerts.webhooks];
  if (webhooks.length === 0) return {};
  const secret = config.env.ALERT_WEBHOOK_SECRET || undefined;
  const notify = webhookNotifier({
    webhooks,
    secret,
    // The alert only: never the webhook's URL, which may hold a token.
    onOutcome: ({ alert, attempts, error }) => {
      if (error === undefined) logger.info({ alert, attempts }, 'budget alert sent');
      else logger.warn({ alert, attempts, err: error.message }, 'budget alert not delivered');
      const about = alert.scope === 'key' ? { keyId: alert.id } : { account: alert.id };
      const event = {
        action: 'budget.alert_sent' as const,
        ...about,
        fields: [alert.period, `${alert.threshold}%`, error === undefined ? 'delivered' : 'failed'],
      };
      const entry = auditEntry(event, { actor: { type: 'gateway', id: null, name: null }, at: Math.floor(nowMs() / 1000), address: null });
      audit.append(entry).catch((err: unknown) => logger.warn({ err }, 'budget alert not recorded in the audit log'));
    },
  });
  const claims = redis ? new (await import('koa-model-gateway/stores/redis')).RedisAlertClaims({ client: redis }) : new MemoryAlertClaims({ nowMs });
  return { alerts: { claims, notify, thresholds: config.gateway.alerts.thresholds } };
}

/** The optional packages a configuration asks for, each list by the setting that asks for it. */
function optionalPeers(config: ServerConfig): Array<[setting: string, packages: string[]]> {
  return [
    ['REDIS_URL', config.redisUrl === null ? [] : ['ioredis']],
    ['BLOB_URL (S3)', config.s3 ? ['@aws-sdk/client-s3', '@aws-sdk/lib-storage'] : []],
    ['METRICS_PORT', config.metricsPort === null ? [] : ['prom-client']],
    ['tracing (OTEL_EXPORTER_OTLP_ENDPOINT)', tracingPackages(config.env)],
    ['a provider of kind bedrock', bedrockPackages(config.gateway.providers)],
  ];
}

/** What a bedrock provider loads at its first call: AWS's signer, hash and EventStream codec, and its default credential chain unless the entry names its variables. */
function bedrockPackages(providers: ServerConfig['gateway']['providers']): string[] {
  const bedrock = providers.filter((provider) => provider.kind === 'bedrock');
  if (bedrock.length === 0) return [];
  const chain = bedrock.some((provider) => provider.accessKeyIdEnv === undefined) ? ['@aws-sdk/credential-providers'] : [];
  return ['@smithy/signature-v4', '@aws-crypto/sha256-js', '@smithy/core', ...chain];
}

/**
 * A `ConfigError` naming every optional package the configuration asks for that is not installed,
 * by the setting that asks for it, and the command that installs them; nothing when all are.
 * @example checkOptionalPeers(config) // METRICS_PORT needs prom-client, not installed: npm install prom-client
 */
export function checkOptionalPeers(config: ServerConfig): void {
  const missing = optionalPeers(config)
    .map(([setting, packages]) => [setting, missingPackages(packages)] as const)
    .filter(([, names]) => names.length > 0);
  if (missing.length === 0) return;
  const needs = missing.map(([setting, names]) => `${setting} needs ${names.join(', ')}`).join('; ');
  throw new ConfigError(`${needs}, not installed: npm install ${missing.flatMap(([, names]) => names).join(' ')}`);
}

/** What a start has opened so far, each with what releases it: released in the reverse order. */
class Opened {
  readonly #releases: Array<() => unknown> = [];

  /** Returns `resource`, to be released by `release` before anything opened earlier. */
  add<Resource>(resource: Resource, release: (resource: Resource) => unknown): Resource {
    this.#releases.push(() => release(resource));
    return resource;
  }

  /** Releases everything, last opened first, each once; rejects with the first failure, once all have been tried. */
  async release(): Promise<void> {
    let failure: { error: unknown } | undefined;
    for (const release of this.#releases.splice(0).reverse()) {
      try {
        await release();
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure) throw failure.error;
  }
}

/**
 * Checks that the optional packages the configuration asks for are installed (`checkOptionalPeers`)
 * and makes the providers (their credentials read from the environment), before it opens anything.
 * Then opens, with the OTEL_* environment, the traces (`startTracing`), the database (migrated),
 * the files directory or bucket and, with REDIS_URL, Redis (the creation and model-call limits then
 * live there), the usage recorder and, with METRICS_PORT, the metrics; the key store is behind a
 * `cachedKeyStore` of `keyCacheSeconds` that forgets a key as soon as any process announces a
 * change to it (`openKeyChanges`). Removes what uploads of dead processes left in the uploads
 * directory, and claims a directory of its own there. A package not installed, a credential that is
 * not set, or a backing service that cannot be reached, is a `ConfigError`: the server does not
 * start without it. A step that fails releases everything the steps before it opened.
 */
export async function openDeployment(config: ServerConfig, logger: Logger, { nowMs = Date.now }: { nowMs?: () => number } = {}): Promise<Deployment> {
  checkOptionalPeers(config);
  const providers = configuredProviders(config);
  const opened = new Opened();
  opened.add(providers, (made) => Promise.all(made.map((provider) => provider.close?.())));
  try {
    const mcpUpstreams = opened.add(await configuredMcpUpstreams(config.gateway.mcpServers, config.env), (made) =>
      Promise.all(made.map((upstream) => upstream.close?.())),
    );
    const mcp = mcpUpstreams.length === 0 ? null : { upstreams: mcpUpstreams, library: await import('koa-model-gateway/mcp') };
    return { ...(await openServices(config, logger, nowMs, providers, opened)), mcp };
  } catch (err) {
    await opened.release().catch((releaseError: unknown) => logger.warn({ err: releaseError }, 'releasing what the failed start had opened'));
    throw err;
  }
}

/** `metrics`, saying how many models have no known price. */
function countUnpriced(metrics: ServerMetrics | null, count: number): ServerMetrics | null {
  metrics?.metrics.unpricedModels(count);
  return metrics;
}

/** `openDeployment`'s steps once the providers are made: each adds what it opens to `opened`. */
async function openServices(
  config: ServerConfig,
  logger: Logger,
  nowMs: () => number,
  providers: Provider[],
  opened: Opened,
): Promise<Omit<Deployment, 'mcp'>> {
  const tracing = await startTracing(config.env, logger);
  if (tracing) opened.add(tracing, (started) => started.shutdown());
  const { models: catalog, unpriced } = await priceCatalog(config.gateway.models);
  if (unpriced.length > 0) logger.warn({ models: unpriced }, 'no price known for these models: their calls cost 0 (give them a price in GATEWAY_CONFIG)');
  const outages = new OutageLog(logger);
  // Knex's and the pool's warnings about connections come with every failed attempt while the
  // database is away; before the stores are open, a database that cannot be reached stops the start
  // with the one line of its ConfigError, and they are not an outage.
  let opening = true;
  const log: DatabaseLog = (level, message, ofConnections) => {
    if (!ofConnections) logger[level]({ component: 'knex' }, message);
    else if (!opening) outages.warned('database', message);
  };
  const stores = opened.add(await openStores(config, { log, writerCheckpointMs: WAL_CHECKPOINT_MS }), (open) => open.close());
  opening = false;
  const { knex } = stores;
  const rates = {
    createsPerMinute: config.gateway.limits.createsPerMinute,
    createsPerDay: config.gateway.limits.createsPerDay,
    bytesPerDay: config.gateway.limits.bytesPerDay,
    nowMs,
  };
  const redis =
    config.redisUrl === null ? null : opened.add(await openRedis(config.redisUrl, logger), (client) => client.quit().catch(() => client.disconnect()));
  const staleUploads = await removeStaleUploads(config.uploadsDir);
  if (staleUploads > 0) logger.info({ staleUploads }, 'removed the temp files of uploads cut short by a crash');
  const uploads = opened.add(await claimUploadsDir(config.uploadsDir), (claim) => claim.release());
  const databaseReady = () => knex.raw('select 1');
  const checks: Record<string, ReadinessCheck> = { database: databaseReady, blobs: stores.blobsReady };
  // By the names the stores' errors give (a Knex store's none: the database's).
  outages.watch('database', databaseReady);
  if (config.s3) outages.watch('s3', stores.blobsReady);
  if (redis) {
    const redisReady = () => redis.ping();
    checks.redis = redisReady;
    outages.watch('redis', redisReady);
  }
  // Before the database and Redis close: their closing is no outage to log.
  opened.add(outages, (log) => log.close());
  const limiter = await creationLimiter(redis, rates);
  const usage = opened.add(
    usageRecorder({
      store: stores.usageStore,
      onError: (err) => logger.warn({ err }, 'usage records'),
    }),
    // After the HTTP server has closed: every call has its record by then.
    (recorder) => recorder.close(),
  );
  // After the HTTP server has closed, before the database: the last calls' records are written.
  const mcpCalls = opened.add(mcpCallRecorder(stores.mcpCalls, logger), (recorder) => recorder.close());
  const keyUses = opened.add(
    keyUseRecorder({
      store: stores.keys,
      onError: (err) => logger.warn({ err }, 'key uses'),
    }),
    // After the HTTP server has closed: the last uses are written.
    (recorder) => recorder.close(),
  );
  const { keyCacheSeconds } = config.gateway;
  const ledger = await spendLedger(redis, nowMs, stores.usageStore, usage, stores.keys);
  const keyChanges = opened.add(await openKeyChanges(knex, redis), (changes) => changes.close());
  // A change made but not announced (Redis away or stalled, past the limiters' timeout) still
  // answers: the other processes refuse or see it once their cache of the key expires.
  const keys = announceKeyChanges(stores.keys, keyChanges, {
    onError: (err, keyId) =>
      logger.warn(
        { err: (err as Error).message, keyId },
        `key change made but not announced: other processes see it within keyCacheSeconds (${keyCacheSeconds} s)`,
      ),
  });
  return {
    config,
    nowMs,
    ...stores,
    // Only the serving process caches: the CLI reads and writes the database directly, and announces.
    keys: keyCacheSeconds > 0 ? cachedKeyStore(keys, { ttlMs: keyCacheSeconds * 1000, changes: keyChanges }) : keys,
    creationLimiter: limiter,
    modelLimiter: await modelLimiter(redis, nowMs),
    cooldowns: await cooldownStore(redis),
    responseCache: await responseCache(redis),
    // An account's budgets are read at most once a second per process: a change reaches every process within that.
    spendLedger: ledger,
    budgets: spendBudgets({
      ledger,
      accounts: cachedAccountBudgets(stores.accountBudgets, { ttlMs: 1000, nowMs }),
      reservationTtlMs: config.gateway.budgets.reservationTtlSeconds * 1000,
      defaultMaxOutputTokens: config.gateway.budgets.defaultMaxOutputTokens,
      refuseUnpriced: config.gateway.budgets.refuseUnpriced,
      ...(await budgetAlerts(config, redis, logger, nowMs, stores.audit)),
    }),
    usageRecorder: usage,
    mcpCallRecorder: mcpCalls,
    keyUses,
    metrics: countUnpriced(await openMetrics(config), unpriced.length),
    tracing,
    providers,
    catalog,
    redis,
    checks,
    tempDir: uploads.dir,
    outages,
    // In the reverse order of opening: the key changes' feed and the recorder (its last records written) first, then the uploads claim, Redis, the database and the traces; the providers' connections last.
    close: () => opened.release(),
  };
}
