import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DEFAULT_FILE_LIMITS } from '../lib/files/files-router.js';
import { validateCatalog, type CatalogModel, type ProviderConfig } from '../lib/models/catalog.js';
import { DEFAULT_CREATION_LIMITS } from '../lib/quota/creation-limits.js';
import { parseS3Settings, type S3Settings } from './blob-config.js';
import { ConfigError } from './config-error.js';
import { DEFAULT_GATEWAY_CONFIG } from './default-config.js';

/** The limits of api.md section 8, all overridable in the config file. */
export interface Limits {
  maxFileBytes: number;
  maxFiles: number;
  maxStoredBytes: number;
  createsPerMinute: number;
  createsPerDay: number;
  bytesPerDay: number;
}

const SPEC_LIMITS: Readonly<Limits> = { ...DEFAULT_FILE_LIMITS, ...DEFAULT_CREATION_LIMITS };

/** The expiry/orphan sweep inside the server. */
export interface SweepSettings {
  /** Seconds between two sweeps; 0 turns the in-process sweep off (run `sweep` from cron instead). */
  intervalSeconds: number;
  /** How old a blob without metadata must be before the sweep removes it. */
  orphanGraceSeconds: number;
}

/** What the `GATEWAY_CONFIG` file holds, after defaults. */
export interface GatewayConfig {
  keyPrefix: string;
  /**
   * How long the server reuses the answer of a key lookup (`cachedKeyStore`), in seconds; 0 turns
   * the cache off. A key revoked by the CLI or another process is refused after at most this long.
   */
  keyCacheSeconds: number;
  limits: Limits;
  sweep: SweepSettings;
  /** Upstream providers, credentials read from the environment variables the file names. */
  providers: ProviderConfig[];
  /** The model catalog. */
  models: CatalogModel[];
}

export type DatabaseSettings =
  | { client: 'sqlite'; filename: string }
  | { client: 'pg'; connectionString: string; display: string };

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
  logLevel: string;
  /** How long in-flight requests may take to finish after SIGTERM/SIGINT. */
  shutdownGraceSeconds: number;
  gateway: GatewayConfig;
}

type Environment = Readonly<Record<string, string | undefined>>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const CONFIG_KEYS = new Set(['keyPrefix', 'keyCacheSeconds', 'limits', 'sweep', 'providers', 'models']);
const PROVIDER_KEYS = new Set(['id', 'kind', 'baseURL', 'apiKeyEnv']);

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function positiveInteger(value: unknown, where: string, allowZero = false): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < (allowZero ? 0 : 1)) {
    throw new ConfigError(`${where} must be ${allowZero ? 'a non-negative' : 'a positive'} integer`);
  }
  return value;
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
    throw new ConfigError(
      `DATABASE_URL must start with postgres://, postgresql:// or sqlite:, got ${scheme ? `'${scheme}:'` : 'something else'}`,
    );
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
 * A provider of the file as lib/models takes it: the credential is read from the environment
 * variable named by `apiKeyEnv`, so that no secret sits in the config file.
 */
function providerFromFile(entry: unknown, index: number, source: string, env: Environment): unknown {
  if (!isObject(entry)) return entry; // validateCatalog names the problem
  const where = `${source}: providers[${index}]`;
  for (const key of Object.keys(entry)) {
    if (key === 'apiKey') throw new ConfigError(`${where}: put the credential in an environment variable and name it in 'apiKeyEnv'`);
    if (!PROVIDER_KEYS.has(key)) throw new ConfigError(`${where}: unknown setting '${key}' (expected ${[...PROVIDER_KEYS].join(', ')})`);
  }
  const { apiKeyEnv, ...provider } = entry;
  if (apiKeyEnv === undefined) return provider;
  if (typeof apiKeyEnv !== 'string' || apiKeyEnv === '') throw new ConfigError(`${where}: 'apiKeyEnv' must name an environment variable`);
  const apiKey = env[apiKeyEnv];
  if (!apiKey) throw new ConfigError(`${where}: the environment variable ${apiKeyEnv} (apiKeyEnv) is not set`);
  return { ...provider, apiKey };
}

/**
 * The config file over the built-in default: `keyPrefix` and `keyCacheSeconds` replace the default's, `limits` and
 * `sweep` per field; `providers` and `models` go together, so a file with either one replaces the
 * default catalog whole.
 */
export function parseGatewayConfig(input: unknown, source: string, env: Environment = {}): GatewayConfig {
  if (!isObject(input)) throw new ConfigError(`${source} must be a JSON object`);
  for (const key of Object.keys(input)) {
    if (!CONFIG_KEYS.has(key)) throw new ConfigError(`${source}: unknown setting '${key}'`);
  }
  const defaults = structuredClone(DEFAULT_GATEWAY_CONFIG);
  const limits = { ...SPEC_LIMITS };

  const keyPrefix = input.keyPrefix ?? defaults.keyPrefix;
  if (typeof keyPrefix !== 'string' || !/^[A-Za-z0-9]{1,32}$/.test(keyPrefix)) {
    throw new ConfigError(`${source}: keyPrefix must be 1 to 32 letters and digits`);
  }
  const keyCacheSeconds = input.keyCacheSeconds === undefined ? defaults.keyCacheSeconds : input.keyCacheSeconds;
  if (typeof keyCacheSeconds !== 'number' || !Number.isSafeInteger(keyCacheSeconds) || keyCacheSeconds < 0 || keyCacheSeconds > 3600) {
    throw new ConfigError(`${source}: keyCacheSeconds must be an integer from 0 to 3600`);
  }
  for (const [section, target] of [
    ['limits', limits],
    ['sweep', defaults.sweep],
  ] as const) {
    const value = input[section];
    if (value === undefined) continue;
    if (!isObject(value)) throw new ConfigError(`${source}: ${section} must be an object`);
    for (const [name, setting] of Object.entries(value)) {
      if (!(name in target)) throw new ConfigError(`${source}: unknown setting '${section}.${name}'`);
      (target as unknown as Record<string, number>)[name] = positiveInteger(setting, `${source}: ${section}.${name}`, section === 'sweep');
    }
  }
  const ownCatalog = input.providers !== undefined || input.models !== undefined;
  const providers = ownCatalog ? (input.providers ?? []) : defaults.providers;
  if (!Array.isArray(providers)) throw new ConfigError(`${source}: providers must be an array`);
  try {
    const catalog = validateCatalog(
      ownCatalog ? (input.models ?? []) : defaults.models,
      providers.map((entry, index) => providerFromFile(entry, index, source, env)),
    );
    return { keyPrefix, keyCacheSeconds, limits, sweep: defaults.sweep, ...catalog };
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
    throw new ConfigError(`${source}: ${err.message.replace(/^koa-model-gateway: /, '')}`);
  }
}

/**
 * The server's configuration from the environment (PORT, HOST, DATA_DIR, DATABASE_URL, REDIS_URL,
 * FILES_DIR, BLOB_URL and the S3 variables of `parseS3Settings`, GATEWAY_CONFIG, LOG_LEVEL,
 * SHUTDOWN_GRACE_SECONDS). Throws a `ConfigError` naming the bad setting.
 */
export function loadConfig(env: Environment = process.env): ServerConfig {
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
      ? parseGatewayConfig({}, 'the default config', env)
      : parseGatewayConfig(readConfigFile(configPath), `GATEWAY_CONFIG (${configPath})`, env);
  return {
    host: env.HOST || '127.0.0.1',
    port: readInteger('PORT', env.PORT, 8080, 65_535),
    dataDir,
    filesDir,
    s3: parseS3Settings(env),
    uploadsDir: join(dataDir, 'uploads'),
    database: parseDatabaseUrl(env.DATABASE_URL, dataDir),
    redisUrl,
    logLevel,
    shutdownGraceSeconds: readInteger('SHUTDOWN_GRACE_SECONDS', env.SHUTDOWN_GRACE_SECONDS, 30, 86_400),
    gateway,
  };
}
