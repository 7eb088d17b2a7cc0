import type { Knex } from 'knex';
import {
  SCOPES,
  canonicalKeyName,
  createApiKey,
  isScope,
  keyStatus,
  rotateApiKey,
  type ApiKeyRecord,
  type KeyCache,
  type KeyChanges,
  type KeyUpdate,
  type Scope,
} from 'koa-model-gateway/auth';
import type { ModelLimits } from 'koa-model-gateway/quota';
import { changedValues, keyObject, type NewKeyObject, type RotatedKeyObject } from 'koa-model-gateway/admin';
import { KEY_NAME_RULE } from '../../lib/auth/key-name.js';
import { KnexKeyStore } from 'koa-model-gateway/stores/knex';
import { loadConfigWithModules, type ServerConfig } from '../config.js';
import { openKeyChanges } from '../deployment.js';
import { describeStore, storeLine } from '../store-description.js';
import { ALERT_OPTIONS, BUDGET_OPTIONS, parseBudget, parseCostAlertThresholds, parseCostSoft, parseMcpTools } from './accounts.js';
import { recordCliAction } from './audit.js';
import { UsageError, accountOption, isoTime, parseCommand, parseTime, withDatabase, type CommandIo } from './command-line.js';

/** The options of `keys create` and `keys update` that set a key's fields. */
const KEY_FIELD_OPTIONS = {
  name: { type: 'string' },
  scope: { type: 'string', multiple: true },
  model: { type: 'string', multiple: true },
  expires: { type: 'string' },
  rpm: { type: 'string' },
  tpm: { type: 'string' },
  'tokens-per-day': { type: 'string' },
  'cost-per-day': { type: 'string' },
  'cost-per-month': { type: 'string' },
  'cost-soft': { type: 'string' },
  'cost-alert-thresholds': { type: 'string' },
} as const;

const LIMIT_OPTIONS = { rpm: 'requestsPerMinute', tpm: 'tokensPerMinute', 'tokens-per-day': 'tokensPerDay' } as const;

type LimitOption = keyof typeof LIMIT_OPTIONS | keyof typeof BUDGET_OPTIONS | keyof typeof ALERT_OPTIONS;

function parseLimits(values: Partial<Record<LimitOption, string>>): ModelLimits {
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
  if (values['cost-soft'] !== undefined) limits.costSoft = parseCostSoft(values['cost-soft']);
  if (values['cost-alert-thresholds'] !== undefined) limits.costAlertThresholds = parseCostAlertThresholds(values['cost-alert-thresholds']);
  return limits;
}

function limitsText(limits: ModelLimits = {}): string {
  const parts = [
    limits.requestsPerMinute && `${limits.requestsPerMinute} requests/min`,
    limits.tokensPerMinute && `${limits.tokensPerMinute} tokens/min`,
    limits.tokensPerDay && `${limits.tokensPerDay} tokens/day`,
    limits.costPerDay && `${limits.costPerDay} USD/day`,
    limits.costPerMonth && `${limits.costPerMonth} USD/month`,
    limits.costSoft !== undefined && (limits.costSoft ? 'soft budgets' : 'enforced budgets'),
    limits.costAlertThresholds && `alerts at ${limits.costAlertThresholds.map((percent) => `${percent}%`).join(', ')}`,
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
      ...KEY_FIELD_OPTIONS,
      cache: { type: 'string' },
      'cache-per-key': { type: 'boolean' },
      'mcp-tools': { type: 'string', multiple: true },
    },
    0,
  );
  if (values.account === undefined) throw new UsageError('keys create needs --account <id>');
  const mcpTools = parseMcpTools(values['mcp-tools'] ?? []);
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
      mcpTools,
    });
    // The options given, by the admin API's names for them.
    const given = {
      name: values.name,
      scopes: values.scope,
      models: values.model,
      expires_at: values.expires,
      limits: Object.keys(limits).length > 0 || undefined,
      cache: values.cache,
      mcp_tools: values['mcp-tools'],
    };
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
        `  MCP tools: ${mcpTools.length === 0 ? 'none' : mcpTools.join(', ')}`,
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
    const revocation = await store.revoke(id);
    if (revocation === 'not_found') return false;
    // Revoked before: nothing changed, nothing to record or announce.
    if (revocation === 'already_revoked') return true;
    const record = await store.get(id);
    await recordCliAction(database, { action: 'key.revoked', keyId: id, ...(record && { account: record.account }) }, io);
    await announce(config, database.knex, id, io, 'revoked', 'refuse the key');
    return true;
  });
  if (!revoked) {
    io.err(`koa-model-gateway: no key with id '${id}'`);
    return 1;
  }
  io.out(values.json ? JSON.stringify({ id, revoked: true }) : `Revoked ${id}`);
  return 0;
}

/**
 * Tells the servers that key `id` changed (Redis with REDIS_URL, else the database), so that they
 * drop what they cached of it. A change that could not be announced still stands: the servers
 * then see it once their cache of the key expires (`keyCacheSeconds`), which the warning says.
 */
async function announce(config: ServerConfig, knex: Knex, id: string, io: CommandIo, done: string, effect: string): Promise<void> {
  try {
    await withKeyChanges(config, knex, (changes) => changes.publish(id));
  } catch (err) {
    io.err(
      `koa-model-gateway: warning: ${done}, but the servers were not told (${(err as Error).message}): they ${effect} within ${config.gateway.keyCacheSeconds} s`,
    );
  }
}

/**
 * `keys update <key-id>`: each option given changes that field, the rest stay: `--name <text>|none`,
 * `--scope <scope>...` (the scopes, replaced), `--model <model>...` or `--every-model`,
 * `--expires <time>|never`, and each limit (`--rpm`, `--tpm`, `--tokens-per-day`, `--cost-per-day`,
 * `--cost-per-month`) `<n>|none` (none: the deployment's default), `--cost-soft true|false|none` and
 * `--cost-alert-thresholds <percents>|none`. Announced to the servers, as a
 * revocation; recorded in the audit log with the values before and after.
 */
async function keysUpdate(args: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseCommand(args, { ...KEY_FIELD_OPTIONS, 'every-model': { type: 'boolean' } }, 1);
  const id = positionals[0] as string;
  const update: KeyUpdate = {};
  if (values.name !== undefined) {
    const canonical = values.name === 'none' ? null : canonicalKeyName(values.name);
    if (canonical === undefined) throw new UsageError(`--name ${KEY_NAME_RULE}, or none`);
    update.name = canonical;
  }
  if (values.scope !== undefined) {
    const scopes: Scope[] = [];
    for (const scope of values.scope) {
      if (!isScope(scope)) throw new UsageError(`unknown scope '${scope}' (scopes: ${SCOPES.join(', ')})`);
      if (!scopes.includes(scope)) scopes.push(scope);
    }
    update.scopes = scopes;
  }
  if (values.model !== undefined && values['every-model']) throw new UsageError('--model and --every-model do not go together');
  if (values.model !== undefined) update.models = [...new Set(values.model)];
  if (values['every-model']) update.models = null;
  if (values.expires !== undefined) update.expiresAt = values.expires === 'never' ? null : parseExpiry(values.expires);
  const limitOptions = [...Object.keys(LIMIT_OPTIONS), ...Object.keys(BUDGET_OPTIONS), ...Object.keys(ALERT_OPTIONS)] as LimitOption[];
  const setLimits = Object.fromEntries(
    limitOptions.flatMap((option) => (values[option] === undefined || values[option] === 'none' ? [] : [[option, values[option]]])),
  );
  const clearedLimits = limitOptions
    .filter((option) => values[option] === 'none')
    .map((option) => ({ ...LIMIT_OPTIONS, ...BUDGET_OPTIONS, ...ALERT_OPTIONS })[option]);
  const limitsGiven = limitOptions.some((option) => values[option] !== undefined);
  const newLimits = parseLimits(setLimits);
  if (Object.keys(update).length === 0 && !limitsGiven) throw new UsageError('keys update needs at least one field to change (keys update --help)');
  const config = await loadConfigWithModules(io.env);
  const updated = await withDatabase(config, async (database) => {
    const store = new KnexKeyStore(database.knex, database.storeOptions);
    const before = await store.get(id);
    if (!before) return undefined;
    if (limitsGiven) {
      // The limits not named stay; none removes one; no limit left: the deployment's defaults.
      const limits: ModelLimits = { ...before.limits, ...newLimits };
      for (const name of clearedLimits) delete limits[name];
      update.limits = Object.keys(limits).length === 0 ? null : limits;
    }
    const record = await store.update(id, update);
    if (!record) return undefined;
    const at = Math.floor(Date.now() / 1000);
    const fields = Object.keys({
      ...(update.name !== undefined && { name: 1 }),
      ...(update.scopes && { scopes: 1 }),
      ...(update.models !== undefined && { models: 1 }),
      ...(update.expiresAt !== undefined && { expires_at: 1 }),
      ...(update.limits !== undefined && { limits: 1 }),
    });
    const changes = changedValues(keyObject(before, at), keyObject(record, at), fields);
    await recordCliAction(database, { action: 'key.updated', keyId: id, account: record.account, fields, changes }, io);
    await announce(config, database.knex, id, io, 'changed', 'apply the change');
    return record;
  });
  if (!updated) {
    io.err(`koa-model-gateway: no key with id '${id}'`);
    return 1;
  }
  const nowSeconds = Date.now() / 1000;
  io.out(
    values.json
      ? JSON.stringify(keyObject(updated, nowSeconds))
      : `Updated ${id}: ${identityText(updated, config.gateway.keyPrefix)}  expires ${isoTime(updated.expiresAt)}  scopes ${updated.scopes.join(',')}  models ${updated.models === null ? 'every model' : updated.models.join(',') || '(none)'}  limits ${limitsText(updated.limits)}`,
  );
  return 0;
}

const MAX_GRACE_SECONDS = 2_592_000;

/**
 * `keys rotate <key-id> [--grace <seconds>]`: a new key with the old one's account, name, scopes,
 * models, limits and expiry, printed once; the old key works for `--grace` seconds more (default 0,
 * at most 30 days). Only an active key never rotated before, as the admin API's rotation.
 */
async function keysRotate(args: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseCommand(args, { grace: { type: 'string' } }, 1);
  const id = positionals[0] as string;
  const grace = values.grace ?? '0';
  if (!/^\d+$/.test(grace) || Number(grace) > MAX_GRACE_SECONDS)
    throw new UsageError(`--grace must be a whole number of seconds from 0 to ${MAX_GRACE_SECONDS}, got '${grace}'`);
  const config = await loadConfigWithModules(io.env);
  const nowSeconds = Math.floor(Date.now() / 1000);
  const result = await withDatabase(config, async (database) => {
    const rotated = await rotateApiKey(new KnexKeyStore(database.knex, database.storeOptions), id, {
      prefix: config.gateway.keyPrefix,
      nowSeconds,
      graceSeconds: Number(grace),
    });
    if (rotated.outcome !== 'rotated') return rotated;
    await recordCliAction(database, { action: 'key.rotated', keyId: id, account: rotated.old.account, replacementId: rotated.replacement.id }, io);
    await announce(config, database.knex, id, io, 'rotated', 'apply the grace');
    return rotated;
  });
  if (result.outcome !== 'rotated') {
    const why = {
      not_found: `no key with id '${id}'`,
      not_active: `key '${id}' is revoked or expired: only an active key can be rotated`,
      replaced: `key '${id}' was rotated already: rotate its replacement`,
    };
    io.err(`koa-model-gateway: ${why[result.outcome]}`);
    return 1;
  }
  const { key, old, replacement } = result;
  if (values.json) {
    io.out(JSON.stringify({ ...keyObject(replacement, nowSeconds), key, replaces: { id: old.id, expires_at: old.expiresAt } } satisfies RotatedKeyObject));
  } else {
    io.out(
      [
        `Rotated ${old.id}: it works until ${isoTime(old.expiresAt)}. Its replacement, ${replacement.id}:`,
        '',
        key,
        '',
        'This is the only time the key is shown: store it now.',
      ].join('\n'),
    );
  }
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

/** `keys create|list|update|rotate|revoke`: the API keys. */
export async function keysCommand([sub, ...args]: string[], io: CommandIo): Promise<number> {
  if (sub === 'create') return keysCreate(args, io);
  if (sub === 'list') return keysList(args, io);
  if (sub === 'update') return keysUpdate(args, io);
  if (sub === 'rotate') return keysRotate(args, io);
  if (sub === 'revoke') return keysRevoke(args, io);
  throw new UsageError(sub === undefined ? 'keys needs a subcommand: create, list, update, rotate or revoke' : `unknown keys subcommand '${sub}'`);
}
