import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { z } from 'zod';
import { DEFAULT_FILE_LIMITS } from 'koa-model-gateway/files';
import { DEFAULT_CREATION_LIMITS } from 'koa-model-gateway/quota';
import { createProvider, providerRegistry, type Provider, type ProviderRegistry } from 'koa-model-gateway/models';
import {
  catalogModelSchema,
  checkCatalog,
  httpBaseUrl,
  modelLimitsSchema,
  nonEmptyString,
  nonNegativeInteger,
  positiveInteger,
  timerMs,
  timerSeconds,
  routingSettingsSchema,
  settingsMessage,
  settingsObject,
} from 'koa-model-gateway/settings';
import { parseS3Settings, type S3Settings } from './blob-config.js';
import { ConfigError } from './config-error.js';
import { dashboardFileSchema, dashboardSettings, type DashboardSettings } from './dashboard-config.js';
import { BUILTIN_PROVIDER, DEFAULT_GATEWAY_CONFIG } from './default-config.js';
import { mcpServersSchema, mcpSettingsSchema } from './mcp-config.js';
import { importProviderKinds } from './provider-modules.js';

type Environment = Readonly<Record<string, string | undefined>>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

const KEY_PREFIX = 'must be 1 to 32 letters and digits';
const KEY_CACHE = 'must be an integer from 0 to 3600';
const ENV_NAME = 'must name an environment variable (letters, digits and _)';

/**
 * A provider as the file describes it: its kind's options (lib's registry), except that the
 * credential is never written in the file: `apiKeyEnv` names the environment variable that holds
 * it, read only when the server starts.
 */
function fileProvider(kind: string, options: z.ZodObject) {
  const { apiKey, ...shape } = options.shape;
  if (apiKey === undefined) return settingsObject({ ...shape, kind: z.literal(kind) });
  return settingsObject({
    ...shape,
    kind: z.literal(kind),
    apiKeyEnv: z
      .string({ error: ENV_NAME })
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: ENV_NAME })
      .optional(),
  }).extend({ apiKey: z.never({ error: "must not be in the file: put the credential in an environment variable and name it in 'apiKeyEnv'" }).optional() });
}

/** What every provider of the file has, whatever its kind. */
const fileProviderFields = z.looseObject({ id: z.string(), kind: z.string(), apiKeyEnv: z.string().optional() });

/** A provider of the config file, credentials not yet read. */
export type FileProvider = z.output<typeof fileProviderFields>;

/** A provider of the file: one of the kinds of `kinds`, with that kind's options. */
function providerSchema(kinds: ProviderRegistry) {
  const names = Object.keys(kinds);
  const [first, ...rest] = Object.entries(kinds).map(([kind, factory]) => fileProvider(kind, factory.options));
  if (first === undefined) throw new TypeError('koa-model-gateway: the provider kinds must name at least one kind');
  return z
    .discriminatedUnion('kind', [first, ...rest], {
      error: (issue) => (issue.code === 'invalid_union' ? `must be one of ${names.join(', ')}` : 'must be an object'),
    })
    .pipe(fileProviderFields);
}

const ARRAY = 'must be an array';

/**
 * The `GATEWAY_CONFIG` file, every key optional: `keyPrefix`, `keyCacheSeconds` and each field of
 * `limits` and `sweep` default to the built-in values; `modelLimits` (each field optional, absent
 * is unlimited) are every key's limits on model calls, which a key's own override field by field.
 * `providers` and `models` replace the built-in echo catalog: a file with either one has exactly
 * the models it lists. The built-in `echo` provider (offline) is always there unless the file
 * gives a provider of that id (or `kinds` has no `echo`), so a file may list only `models`. Each
 * provider's `kind` is one of `kinds`, its options that kind's.
 */
const gatewayConfigSchema = (kinds: ProviderRegistry) =>
  settingsObject({
    keyPrefix: z
      .string({ error: KEY_PREFIX })
      .regex(/^[A-Za-z0-9]{1,32}$/, { error: KEY_PREFIX })
      .default(DEFAULT_GATEWAY_CONFIG.keyPrefix),
    keyCacheSeconds: z.int({ error: KEY_CACHE }).min(0, { error: KEY_CACHE }).max(3600, { error: KEY_CACHE }).default(DEFAULT_GATEWAY_CONFIG.keyCacheSeconds),
    limits: settingsObject({
      maxFileBytes: positiveInteger.default(DEFAULT_FILE_LIMITS.maxFileBytes),
      maxFiles: positiveInteger.default(DEFAULT_FILE_LIMITS.maxFiles),
      maxStoredBytes: positiveInteger.default(DEFAULT_FILE_LIMITS.maxStoredBytes),
      createsPerMinute: positiveInteger.default(DEFAULT_CREATION_LIMITS.createsPerMinute),
      createsPerDay: positiveInteger.default(DEFAULT_CREATION_LIMITS.createsPerDay),
      bytesPerDay: positiveInteger.default(DEFAULT_CREATION_LIMITS.bytesPerDay),
    }).prefault({}),
    modelLimits: modelLimitsSchema.prefault({}),
    /** Retries, fallbacks and cooldowns of the model calls (`RoutingOptions` of the library, without its functions); with REDIS_URL, cooldowns are shared. */
    routing: routingSettingsSchema.prefault({}),
    /**
     * How long a provider may stay silent in one attempt, before its answer's headers or between two
     * reads of its body (the model handlers' `timeoutMs`): a silent attempt is a timeout, retried as
     * `routing` says. Default 300,000.
     */
    upstreamTimeoutMs: timerMs.optional(),
    /**
     * The largest JSON answer, and the largest event of a streamed answer, read from a provider, in
     * bytes (the model handlers' `maxUpstreamBytes`): one over it is a 502 naming the limit. Default 33,554,432 (32 MiB).
     */
    upstreamMaxBytes: positiveInteger.optional(),
    /** How calls reserve their maximum cost against budgets (`SpendBudgetsOptions` of the library). */
    budgets: settingsObject({
      /** How long a call's reservation holds at most, in seconds: an instance that dies holds its calls' reservations no longer. Default 900. */
      reservationTtlSeconds: positiveInteger.max(86_400, { error: 'must be a whole number of seconds from 1 to 86,400' }).default(900),
      /** The output tokens reserved for a call that names no maximum. Default 4096. */
      defaultMaxOutputTokens: positiveInteger.default(4096),
      /** Whether a call to a model with no known price is refused (400 `model_unpriced`) when its key or account has a budget. Default false. */
      refuseUnpriced: z.boolean({ error: 'must be true or false' }).default(false),
    }).prefault({}),
    /** Budget alerts: the webhooks told (besides ALERT_WEBHOOK_URL) and the thresholds, in percent of each budget. */
    alerts: settingsObject({
      webhooks: z
        .array(settingsObject({ url: httpBaseUrl, format: z.enum(['generic', 'slack'], { error: "must be 'generic' or 'slack'" }).default('generic') }), {
          error: ARRAY,
        })
        .max(10)
        .default([]),
      thresholds: z
        .array(positiveInteger.max(1000, { error: 'must be whole percents from 1 to 1000' }), { error: ARRAY })
        .min(1)
        .max(10)
        .default([50, 80, 100]),
    }).prefault({}),
    sweep: settingsObject({
      /** Seconds between two sweeps; 0 turns the in-process sweep off (run `sweep` from cron instead). */
      intervalSeconds: timerSeconds.default(DEFAULT_GATEWAY_CONFIG.sweep.intervalSeconds),
      /** How old a blob without metadata must be before the sweep removes it. */
      orphanGraceSeconds: nonNegativeInteger.default(DEFAULT_GATEWAY_CONFIG.sweep.orphanGraceSeconds),
    }).prefault({}),
    /** Who signs in to the dashboard and for how long (dashboard-config.ts); the environment's settings win. */
    dashboard: dashboardFileSchema,
    /** Modules that add provider kinds (`importProviderKinds()`), read by `loadConfigWithModules()`. */
    providerModules: z.array(nonEmptyString, { error: ARRAY }).optional(),
    providers: z.array(providerSchema(kinds), { error: ARRAY }).optional(),
    models: z.array(catalogModelSchema, { error: ARRAY }).optional(),
    /** The upstream MCP servers behind `/mcp` (docs/MCP.md): none by default, and then no `/mcp`. */
    mcpServers: mcpServersSchema,
    mcp: mcpSettingsSchema.prefault({}),
  })
    .transform(({ providers, models, ...settings }) => {
      const listed = providers ?? [];
      const echoTaken = listed.some((provider) => provider.id === BUILTIN_PROVIDER.id) || !Object.hasOwn(kinds, BUILTIN_PROVIDER.kind);
      const builtIn: FileProvider[] = echoTaken ? [] : [{ ...BUILTIN_PROVIDER }];
      const ownCatalog = providers !== undefined || models !== undefined;
      return {
        ...settings,
        providers: [...listed, ...builtIn],
        models: ownCatalog ? (models ?? []) : catalogModelSchema.array().parse(DEFAULT_GATEWAY_CONFIG.models),
      };
    })
    .superRefine((config, ctx) => checkCatalog(ctx, config));

/** What the `GATEWAY_CONFIG` file holds, after defaults. */
export type GatewayConfig = z.output<ReturnType<typeof gatewayConfigSchema>>;

export type DatabaseSettings = { client: 'sqlite'; filename: string } | { client: 'pg'; connectionString: string; display: string };

/** Everything the server and the CLI are configured with. */
export interface ServerConfig {
  host: string;
  port: number;
  dataDir: string;
  filesDir: string;
  /** Set by BLOB_URL: the files are kept in this bucket instead of `filesDir`. */
  s3: S3Settings | null;
  /** Where uploads are streamed before they are validated. */
  uploadsDir: string;
  database: DatabaseSettings;
  redisUrl: string | null;
  /** The port of the metrics listener (`GET /metrics`, on `host`); null: no metrics listener. */
  metricsPort: number | null;
  logLevel: string;
  /** How long in-flight requests may take to finish after SIGTERM/SIGINT. */
  shutdownGraceSeconds: number;
  /** Days the sweep keeps the usage records (`USAGE_RETENTION_DAYS`) and their roll-ups (`USAGE_ROLLUP_RETENTION_DAYS`); 0: forever. */
  usageRetention: { recordsDays: number; rollupsDays: number };
  gateway: GatewayConfig;
  /** The dashboard's sign-in: sessions, the admin token's sign-in, the OIDC provider. */
  dashboard: DashboardSettings;
  /** The provider kinds the file's providers were checked against, and are made by. */
  providerKinds: ProviderRegistry;
  /** The environment the configuration was read from: `configuredProviders()` reads the credentials there. */
  env: Environment;
}

function readInteger(name: string, raw: string | undefined, fallback: number, max: number): number {
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value > max) throw new ConfigError(`${name} must be an integer from 0 to ${max}, got '${raw}'`);
  return value;
}

/**
 * `DATABASE_URL`: unset is a SQLite file in the data dir, `sqlite:<path>` a SQLite file elsewhere,
 * `postgres://` / `postgresql://` PostgreSQL. Messages never repeat the URL, which may hold a password.
 */
export function parseDatabaseUrl(raw: string | undefined, dataDir: string): DatabaseSettings {
  if (raw === undefined || raw === '') return { client: 'sqlite', filename: join(dataDir, 'gateway.sqlite') };
  if (raw.startsWith('sqlite:')) {
    const path = raw.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (path === '') throw new ConfigError('DATABASE_URL: sqlite: needs a file path, as in sqlite:./data/gateway.sqlite');
    return { client: 'sqlite', filename: resolve(path) };
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(raw)?.[1]?.toLowerCase();
  if (scheme !== 'postgres' && scheme !== 'postgresql') {
    throw new ConfigError(`DATABASE_URL must start with postgres://, postgresql:// or sqlite:, got ${scheme ? `'${scheme}:'` : 'something else'}`);
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('DATABASE_URL is not a valid postgres:// URL');
  }
  if (url.hostname === '') throw new ConfigError('DATABASE_URL: the postgres:// URL names no host');
  const database = url.pathname.replace(/^\//, '');
  return {
    client: 'pg',
    connectionString: raw,
    display: `postgres://${url.host}/${database}`,
  };
}

function readConfigFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new ConfigError(`GATEWAY_CONFIG: cannot read ${path} (${code})`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`GATEWAY_CONFIG: ${path} is not valid JSON (${(err as Error).message})`);
  }
}

/**
 * The config file's content over the built-in defaults. `source` names the file in the one-line
 * `ConfigError` of a bad setting: `<source>: limits.maxFiles must be a positive integer`.
 * Credentials are not read here: `configuredProviders()` reads them, so that the key commands run without them.
 * The file's providers are of the kinds of `providerKinds` (default: lib's built-in `providerRegistry`).
 */
export function parseGatewayConfig(input: unknown, source: string, providerKinds: ProviderRegistry = providerRegistry): GatewayConfig {
  const result = gatewayConfigSchema(providerKinds).safeParse(input);
  if (!result.success) throw new ConfigError(`${source}: ${settingsMessage(result.error, 'the config')}`);
  return result.data;
}

/**
 * The configured providers, made by the configuration's provider kinds, each credential read from
 * the environment variable its `apiKeyEnv` names. An unset variable is a `ConfigError`: the server
 * does not start without it.
 * @example const models = modelsRouter({ catalog: config.gateway.models, providers: configuredProviders(config) })
 */
export function configuredProviders(config: Pick<ServerConfig, 'gateway' | 'env' | 'providerKinds'>): Provider[] {
  return config.gateway.providers.map(({ apiKeyEnv, ...options }) => {
    if (apiKeyEnv === undefined) return createProvider(options, config.providerKinds);
    const apiKey = config.env[apiKeyEnv];
    if (!apiKey) throw new ConfigError(`provider '${options.id}': the environment variable ${apiKeyEnv} (its apiKeyEnv) is not set`);
    return createProvider({ ...options, apiKey }, config.providerKinds);
  });
}

/** What `loadConfig()` is given besides the environment. */
export interface LoadConfigOptions {
  /**
   * The provider kinds a `GATEWAY_CONFIG` file may name: extend lib's built-in ones with kinds
   * from other packages. Default: `providerRegistry` (openai, anthropic, echo, gemini, vertex).
   * @example loadConfig(process.env, { providerKinds: { ...providerRegistry, cohere: cohereKind } })
   */
  providerKinds?: ProviderRegistry;
}

/**
 * The server's configuration from the environment (PORT, HOST, DATA_DIR, DATABASE_URL, REDIS_URL,
 * FILES_DIR, BLOB_URL and the S3 variables of `parseS3Settings`, GATEWAY_CONFIG, LOG_LEVEL,
 * SHUTDOWN_GRACE_SECONDS, METRICS_PORT, USAGE_RETENTION_DAYS, USAGE_ROLLUP_RETENTION_DAYS, and the dashboard's of `dashboardSettings`). Throws a `ConfigError` naming the bad setting.
 */
export function loadConfig(env: Environment = process.env, { providerKinds = providerRegistry }: LoadConfigOptions = {}): ServerConfig {
  const dataDir = resolve(env.DATA_DIR || './data');
  const filesDir = env.FILES_DIR ? resolve(env.FILES_DIR) : join(dataDir, 'files');
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got '${logLevel}'`);
  const redisUrl = env.REDIS_URL || null;
  if (redisUrl !== null && !/^rediss?:\/\//.test(redisUrl)) {
    throw new ConfigError('REDIS_URL must start with redis:// or rediss://');
  }
  const configPath = env.GATEWAY_CONFIG ? resolve(env.GATEWAY_CONFIG) : null;
  const gateway =
    configPath === null
      ? parseGatewayConfig({}, 'the default config', providerKinds)
      : parseGatewayConfig(readConfigFile(configPath), `GATEWAY_CONFIG (${configPath})`, providerKinds);
  return {
    host: env.HOST || '127.0.0.1',
    port: readInteger('PORT', env.PORT, 8080, 65_535),
    dataDir,
    filesDir,
    s3: parseS3Settings(env),
    uploadsDir: join(dataDir, 'uploads'),
    database: parseDatabaseUrl(env.DATABASE_URL, dataDir),
    redisUrl,
    metricsPort: env.METRICS_PORT ? readInteger('METRICS_PORT', env.METRICS_PORT, 0, 65_535) : null,
    logLevel,
    shutdownGraceSeconds: readInteger('SHUTDOWN_GRACE_SECONDS', env.SHUTDOWN_GRACE_SECONDS, 30, 86_400),
    usageRetention: {
      recordsDays: readInteger('USAGE_RETENTION_DAYS', env.USAGE_RETENTION_DAYS, 30, 36_500),
      rollupsDays: readInteger('USAGE_ROLLUP_RETENTION_DAYS', env.USAGE_ROLLUP_RETENTION_DAYS, 400, 36_500),
    },
    gateway,
    dashboard: dashboardSettings(gateway.dashboard, env),
    providerKinds,
    env,
  };
}

/**
 * `loadConfig()` with the provider kinds of the `GATEWAY_CONFIG` file's `providerModules` (paths
 * relative to the file, or package names) imported first: what every CLI command reads. Throws a
 * `ConfigError` naming the bad setting or module.
 */
export async function loadConfigWithModules(env: Environment = process.env): Promise<ServerConfig> {
  const configPath = env.GATEWAY_CONFIG ? resolve(env.GATEWAY_CONFIG) : null;
  const content = configPath === null ? {} : readConfigFile(configPath);
  const listed = typeof content === 'object' && content !== null && 'providerModules' in content ? content.providerModules : undefined;
  // Anything else than a list of names is refused by loadConfig(), in its own words.
  const specifiers = Array.isArray(listed) && listed.every((name) => typeof name === 'string') ? listed : [];
  if (specifiers.length === 0 || configPath === null) return loadConfig(env);
  return loadConfig(env, { providerKinds: await importProviderKinds(specifiers, dirname(configPath)) });
}
