import type { Knex } from 'knex';
import { SCOPES, canonicalKeyName, createApiKey, isScope, keyStatus, type ApiKeyRecord, type KeyCache, type KeyChanges, type Scope } from 'koa-model-gateway/auth';
import type { ModelLimits } from 'koa-model-gateway/quota';
import { keyObject, type NewKeyObject } from 'koa-model-gateway/admin';
import { KEY_NAME_RULE } from '../../lib/auth/key-name.js';
import { KnexKeyStore } from 'koa-model-gateway/stores/knex';
import { loadConfigWithModules, type ServerConfig } from '../config.js';
import { openKeyChanges } from '../deployment.js';
import { describeStore, storeLine } from '../store-description.js';
import { BUDGET_OPTIONS, parseBudget } from './accounts.js';
import { recordCliAction } from './audit.js';
import { UsageError, accountOption, isoTime, parseCommand, parseTime, withDatabase, type CommandIo } from './command-line.js';

const LIMIT_OPTIONS = { rpm: 'requestsPerMinute', tpm: 'tokensPerMinute', 'tokens-per-day': 'tokensPerDay' } as const;

function parseLimits(values: Partial<Record<keyof typeof LIMIT_OPTIONS | keyof typeof BUDGET_OPTIONS, string>>): ModelLimits {
  const limits: ModelLimits = {};
  for (const [option, name] of Object.entries(LIMIT_OPTIONS)) {
    const value = values[option as keyof typeof LIMIT_OPTIONS];
    if (value === undefined) continue;
    if (!/^[1-9]\d*$/.test(value) || !Number.isSafeInteger(Number(value))) {
      throw new UsageError(`--${option} must be a positive integer, got '${value}'`);
    }
    limits[name] = Number(value);
  }
  for (const [option, name] of Object.entries(BUDGET_OPTIONS)) {
    const value = values[option as keyof typeof BUDGET_OPTIONS];
    if (value !== undefined) limits[name] = parseBudget(option, value);
  }
  return limits;
}

function limitsText(limits: ModelLimits = {}): string {
  const parts = [
    limits.requestsPerMinute && `${limits.requestsPerMinute} requests/min`,
    limits.tokensPerMinute && `${limits.tokensPerMinute} tokens/min`,
    limits.tokensPerDay && `${limits.tokensPerDay} tokens/day`,
    limits.costPerDay && `${limits.costPerDay} USD/day`,
    limits.costPerMonth && `${limits.costPerMonth} USD/month`,
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(', ') : 'default';
}

function parseExpiry(value: string | undefined): number | null {
  if (value === undefined) return null;
  const ms = parseTime('--expires', value);
  if (ms <= Date.now()) throw new UsageError('--expires must be in the future');
  return Math.floor(ms / 1000);
}

/** `keys create`: a key made by `createApiKey()`, printed once (with `--json`, as the admin API answers it). */
async function keysCreate(args: string[], io: CommandIo): Promise<number> {
  const { values } = parseCommand(
    args,
    {
      account: { type: 'string' },
      name: { type: 'string' },
      scope: { type: 'string', multiple: true },
      model: { type: 'string', multiple: true },
      expires: { type: 'string' },
      rpm: { type: 'string' },
      tpm: { type: 'string' },
      'tokens-per-day': { type: 'string' },
      'cost-per-day': { type: 'string' },
      'cost-per-month': { type: 'string' },
      cache: { type: 'string' },
      'cache-per-key': { type: 'boolean' },
    },
    0,
  );
  if (values.account === undefined) throw new UsageError('keys create needs --account <id>');
  const account = accountOption(values.account);
  const name = values.name === undefined ? null : canonicalKeyName(values.name);
  if (name === undefined) throw new UsageError(`--name ${KEY_NAME_RULE}`);
  const scopes: Scope[] = [];
  for (const scope of values.scope ?? SCOPES) {
    if (!isScope(scope)) throw new UsageError(`unknown scope '${scope}' (scopes: ${SCOPES.join(', ')})`);
    if (!scopes.includes(scope)) scopes.push(scope);
  }
  const models = values.model ? [...new Set(values.model)] : null;
  const expiresAt = parseExpiry(values.expires);
  const limits = parseLimits(values);
  const cache = parseCache(values.cache, values['cache-per-key'] === true);
  const config = await loadConfigWithModules(io.env);
  const catalog = new Set(config.gateway.models.map((model) => model.id));
  // Allowed, since the catalog may grow, but most likely a typo.
  for (const model of models ?? []) if (!catalog.has(model)) io.err(`koa-model-gateway: warning: model '${model}' is not in the catalog`);
  const { key, record } = await withDatabase(config, async (database) => {
    const created = await createApiKey(new KnexKeyStore(database.knex, database.storeOptions), {
      prefix: config.gateway.keyPrefix,
      account,
      scopes,
      models,
      expiresAt,
      limits,
      ...(cache && { cache }),
      name,
    });
    // The options given, by the admin API's names for them.
    const given = { name: values.name, scopes: values.scope, models: values.model, expires_at: values.expires, limits: Object.keys(limits).length > 0 || undefined, cache: values.cache };
    const fields = ['account', ...Object.entries(given).flatMap(([field, value]) => (value === undefined ? [] : [field]))];
    await recordCliAction(database, { action: 'key.created', keyId: created.record.id, account, fields }, io);
    return created;
  });
  const store = describeStore(config.database);
  if (values.json) {
    io.out(JSON.stringify({ ...keyObject(record, Math.floor(Date.now() / 1000)), key, store } satisfies NewKeyObject & { store: unknown }));
  } else {
    io.err(storeLine(store));
    io.out(
      [
        `Created ${record.id}${name === null ? '' : ` (${name})`} for account ${account}`,
        `  scopes:  ${scopes.join(', ')}`,
        `  models:  ${models === null ? 'every model' : models.join(', ')}`,
        `  expires: ${isoTime(expiresAt)}`,
        `  limits:  ${limitsText(record.limits)}`,
        ...(record.cache ? [`  cache:   ${record.cache.ttlSeconds} s${record.cache.perKey ? ', its own entries' : ''}`] : []),
        '',
        key,
        '',
        'This is the only time the key is shown: store it now.',
      ].join('\n'),
    );
  }
  return 0;
}

/** `--cache <seconds>` (and `--cache-per-key`): the key's own response caching. */
function parseCache(seconds: string | undefined, perKey: boolean): KeyCache | undefined {
  if (seconds === undefined) {
    if (perKey) throw new UsageError('--cache-per-key needs --cache <seconds>');
    return undefined;
  }
  if (!/^\d{1,9}$/.test(seconds) || Number(seconds) <= 0) throw new UsageError('--cache must be a positive integer of seconds');
  return { ttlSeconds: Number(seconds), ...(perKey && { perKey: true }) };
}

/** What tells a key apart in the list: its name, the secret's last four characters, its replacement and its last use. */
function identityText(record: ApiKeyRecord, prefix: string): string {
  return [
    record.name !== undefined && `name ${JSON.stringify(record.name)}`,
    record.hint !== undefined && `${prefix}_sk_…${record.hint}`,
    record.replacedBy !== undefined && `replaced by ${record.replacedBy}`,
    `last used ${record.lastUsedAt === undefined ? 'never' : isoTime(record.lastUsedAt)}`,
  ]
    .filter(Boolean)
    .join('  ');
}

async function keysList(args: string[], io: CommandIo): Promise<number> {
  const { values } = parseCommand(args, { account: { type: 'string' } }, 0);
  const config = await loadConfigWithModules(io.env);
  const filter = values.account === undefined ? {} : { account: accountOption(values.account) };
  const records = await withDatabase(config, ({ knex, storeOptions }) => new KnexKeyStore(knex, storeOptions).list(filter));
  const nowSeconds = Date.now() / 1000;
  if (values.json) {
    io.out(JSON.stringify(records.map((record) => keyObject(record, nowSeconds))));
    return 0;
  }
  if (records.length === 0) {
    io.out('No keys.');
    return 0;
  }
  for (const record of records) {
    const models = record.models === null ? 'every model' : record.models.join(',') || '(none)';
    io.out(
      `${record.id}  ${record.account}  ${keyStatus(record, nowSeconds)}  ${identityText(record, config.gateway.keyPrefix)}  created ${isoTime(record.createdAt)}  expires ${isoTime(record.expiresAt)}  scopes ${record.scopes.join(',')}  models ${models}  limits ${limitsText(record.limits)}`,
    );
  }
  return 0;
}

/**
 * Revokes the key and announces it where the servers listen (Redis with REDIS_URL, else the
 * database). A revocation that could not be announced still stands: the servers then refuse the
 * key once their cache of it expires (`keyCacheSeconds`).
 */
async function keysRevoke(args: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {}, 1);
  const id = positionals[0] as string;
  const config = await loadConfigWithModules(io.env);
  const revoked = await withDatabase(config, async (database) => {
    const store = new KnexKeyStore(database.knex, database.storeOptions);
    if (!(await store.revoke(id))) return false;
    const record = await store.get(id);
    await recordCliAction(database, { action: 'key.revoked', keyId: id, ...(record && { account: record.account }) }, io);
    try {
      await withKeyChanges(config, database.knex, (changes) => changes.publish(id));
    } catch (err) {
      const seconds = config.gateway.keyCacheSeconds;
      io.err(`koa-model-gateway: warning: revoked, but the servers were not told (${(err as Error).message}): they refuse the key within ${seconds} s`);
    }
    return true;
  });
  if (!revoked) {
    io.err(`koa-model-gateway: no key with id '${id}'`);
    return 1;
  }
  io.out(values.json ? JSON.stringify({ id, revoked: true }) : `Revoked ${id}`);
  return 0;
}

/** The deployment's KeyChanges, open for `use`: on Redis when REDIS_URL is set, else on the database. */
async function withKeyChanges<T>(config: ServerConfig, knex: Knex, use: (changes: KeyChanges) => Promise<T>): Promise<T> {
  let redis = null;
  if (config.redisUrl !== null) {
    const { createRedisClient } = await import('koa-model-gateway/stores/redis');
    redis = await createRedisClient(config.redisUrl);
  }
  const changes = await openKeyChanges(knex, redis);
  try {
    return await use(changes);
  } finally {
    await changes.close();
    await redis?.quit().catch(() => redis?.disconnect());
  }
}

/** `keys create|list|revoke`: the API keys. */
export async function keysCommand([sub, ...args]: string[], io: CommandIo): Promise<number> {
  if (sub === 'create') return keysCreate(args, io);
  if (sub === 'list') return keysList(args, io);
  if (sub === 'revoke') return keysRevoke(args, io);
  throw new UsageError(sub === undefined ? 'keys needs a subcommand: create, list or revoke' : `unknown keys subcommand '${sub}'`);
}
