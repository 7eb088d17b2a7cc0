import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Knex } from 'knex';
import {
  KEY_NAME_RULE,
  SCOPES,
  canonicalKeyName,
  createAdminToken,
  createApiKey,
  isScope,
  keyObject,
  keyStatus,
  usageReport,
  type ApiKeyRecord,
  type KeyChanges,
  type ModelLimits,
  type NewKeyObject,
  type Scope,
  type UsageGrouping,
  type UsageQuery,
  type UsageTotals,
} from 'koa-model-gateway';
import { KnexAdminTokenStore, KnexKeyStore, KnexUsageStore } from 'koa-model-gateway/stores/knex';
import { BUDGET_OPTIONS, accountsSetLimits, parseBudget } from './budget-commands.js';
import { UsageError, accountOption, type CommandIo } from './command-line.js';
import { recordCliAction } from './cli-audit.js';
import { ConfigError } from './config-error.js';
import { loadConfigWithModules, type ServerConfig } from './config.js';
import { describeDatabase, openMigratedDatabase, type Database } from './database.js';
import { openKeyChanges, openStores, sweepDeployment } from './deployment.js';
import { createLogger } from './logger.js';
import { serve } from './server.js';
import { describeStore, storeLine } from './store-description.js';

export const USAGE = `Usage: koa-model-gateway <command> [options]

Commands:
  serve                                 serve the API until SIGTERM/SIGINT
  migrate                               bring the database to the latest schema
  keys create --account <id> [--name <text>] [--scope <scope>]... [--model <model>]...
              [--expires <iso-time>] [--rpm <n>] [--tpm <n>] [--tokens-per-day <n>]
              [--cost-per-day <usd>] [--cost-per-month <usd>]
                                        create a key and print it, once (no --scope: every scope;
                                        a limit left out: the deployment's default)
  keys list [--account <id>]            list keys (never the keys themselves)
  keys revoke <key-id>                  revoke a key; every server refuses it within a second
  accounts set-limits <account> [--cost-per-day <usd>|none] [--cost-per-month <usd>|none]
                                        set (or, with none, remove) an account's budgets, over all its keys
  admin-tokens create [--name <text>]   create an admin token (admin API, dashboard) and print it, once
  admin-tokens list                     list admin tokens (never the tokens themselves)
  admin-tokens revoke <token-id>        revoke an admin token and end its dashboard sessions
  sweep                                 remove expired files and orphaned blobs now
  usage [--account <id>] [--key <key-id>] [--since <iso-time>] [--by day|model|key]
                                        requests (answered: 2xx; refused: 4xx, 5xx), tokens and cost (USD)
                                        of model calls: totals, and rows per UTC day (default), model or key

Options:
  --json                                print one JSON document
  --help                                print this text

Environment: PORT, HOST, DATA_DIR, DATABASE_URL, REDIS_URL, FILES_DIR, BLOB_URL (with AWS_REGION,
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, S3_ENDPOINT, S3_FORCE_PATH_STYLE), GATEWAY_CONFIG,
  LOG_LEVEL, SHUTDOWN_GRACE_SECONDS, METRICS_PORT
Scopes: ${SCOPES.join(', ')}`;

type Options = NonNullable<ParseArgsConfig['options']>;

function parse<O extends Options>(args: string[], options: O, positionals: number) {
  let parsed;
  try {
    parsed = parseArgs({ args, options: { ...options, json: { type: 'boolean' } }, allowPositionals: positionals > 0, strict: true });
  } catch (err) {
    // node:util's messages can run to several lines ('--tpm -5' explains how to pass a dash): one is enough.
    throw new UsageError((err as Error).message.split('\n')[0]);
  }
  if (parsed.positionals.length !== positionals) {
    throw new UsageError(positionals === 0 ? `unexpected argument '${parsed.positionals[0]}'` : 'expected exactly one id');
  }
  return parsed;
}

async function withDatabase<T>(config: ServerConfig, use: (database: Database) => Promise<T>): Promise<T> {
  const database = await openMigratedDatabase(config.database);
  try {
    return await use(database);
  } finally {
    await database.close();
  }
}

const withKeys = <T>(config: ServerConfig, use: (keys: KnexKeyStore) => Promise<T>) =>
  withDatabase(config, (database) => use(new KnexKeyStore(database.knex, database.storeOptions)));

const iso = (seconds: number | null) => (seconds === null ? 'never' : new Date(seconds * 1000).toISOString());

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

/** Unix ms of an ISO 8601 time (a date alone is its UTC midnight). */
function parseTime(option: string, value: string): number {
  const ms = /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(ms)) throw new UsageError(`${option} must be an ISO 8601 time such as 2030-01-31T00:00:00Z, got '${value}'`);
  return ms;
}

function parseExpiry(value: string | undefined): number | null {
  if (value === undefined) return null;
  const ms = parseTime('--expires', value);
  if (ms <= Date.now()) throw new UsageError('--expires must be in the future');
  return Math.floor(ms / 1000);
}

/** `--account`, as the admin API takes an account name (trimmed, NFC), or a usage error naming the rule. */
async function keysCreate(args: string[], io: CommandIo): Promise<number> {
  const { values } = parse(
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
      name,
    });
    // The options given, by the admin API's names for them.
    const given = { name: values.name, scopes: values.scope, models: values.model, expires_at: values.expires, limits: Object.keys(limits).length > 0 || undefined };
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
        `  expires: ${iso(expiresAt)}`,
        `  limits:  ${limitsText(record.limits)}`,
        '',
        key,
        '',
        'This is the only time the key is shown: store it now.',
      ].join('\n'),
    );
  }
  return 0;
}

/** What tells a key apart in the list: its name, the secret's last four characters, its replacement and its last use. */
function identityText(record: ApiKeyRecord, prefix: string): string {
  return [
    record.name !== undefined && `name ${JSON.stringify(record.name)}`,
    record.hint !== undefined && `${prefix}_sk_…${record.hint}`,
    record.replacedBy !== undefined && `replaced by ${record.replacedBy}`,
    `last used ${record.lastUsedAt === undefined ? 'never' : iso(record.lastUsedAt)}`,
  ]
    .filter(Boolean)
    .join('  ');
}

async function keysList(args: string[], io: CommandIo): Promise<number> {
  const { values } = parse(args, { account: { type: 'string' } }, 0);
  const config = await loadConfigWithModules(io.env);
  const filter = values.account === undefined ? {} : { account: accountOption(values.account) };
  const records = await withKeys(config, (keys) => keys.list(filter));
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
      `${record.id}  ${record.account}  ${keyStatus(record, nowSeconds)}  ${identityText(record, config.gateway.keyPrefix)}  created ${iso(record.createdAt)}  expires ${iso(record.expiresAt)}  scopes ${record.scopes.join(',')}  models ${models}  limits ${limitsText(record.limits)}`,
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
  const { values, positionals } = parse(args, {}, 1);
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

async function adminTokensCreate(args: string[], io: CommandIo): Promise<number> {
  const { values } = parse(args, { name: { type: 'string' } }, 0);
  const name = values.name?.trim() || null;
  if (name !== null && name.length > 255) throw new UsageError('--name must be at most 255 characters');
  const config = await loadConfigWithModules(io.env);
  const { token, record } = await withDatabase(config, async (database) => {
    const created = await createAdminToken(new KnexAdminTokenStore(database.knex, database.storeOptions), { prefix: config.gateway.keyPrefix, name });
    await recordCliAction(database, { action: 'admin_token.created', tokenId: created.record.id, fields: name === null ? [] : ['name'] }, io);
    return created;
  });
  const store = describeStore(config.database);
  if (values.json) {
    io.out(JSON.stringify({ id: record.id, token, store }));
  } else {
    io.err(storeLine(store));
    io.out(
      [
        `Created admin token ${record.id}${name === null ? '' : ` (${name})`}`,
        '',
        token,
        '',
        'This is the only time the token is shown: store it now. It opens /admin/v1 and the dashboard at /dashboard.',
      ].join('\n'),
    );
  }
  return 0;
}

async function adminTokensList(args: string[], io: CommandIo): Promise<number> {
  const { values } = parse(args, {}, 0);
  const config = await loadConfigWithModules(io.env);
  const records = await withDatabase(config, ({ knex, storeOptions }) => new KnexAdminTokenStore(knex, storeOptions).list());
  if (values.json) {
    io.out(JSON.stringify(records.map((record) => ({ id: record.id, name: record.name, created_at: record.createdAt, revoked_at: record.revokedAt }))));
    return 0;
  }
  if (records.length === 0) io.out('No admin tokens.');
  for (const record of records) {
    const status = record.revokedAt === null ? 'active' : 'revoked';
    io.out(`${record.id}  ${status}  created ${iso(record.createdAt)}  ${record.name ?? ''}`.trimEnd());
  }
  return 0;
}

async function adminTokensRevoke(args: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parse(args, {}, 1);
  const id = positionals[0] as string;
  const config = await loadConfigWithModules(io.env);
  const revoked = await withDatabase(config, async (database) => {
    if (!(await new KnexAdminTokenStore(database.knex, database.storeOptions).revoke(id))) return false;
    await recordCliAction(database, { action: 'admin_token.revoked', tokenId: id }, io);
    return true;
  });
  if (!revoked) {
    io.err(`koa-model-gateway: no admin token with id '${id}'`);
    return 1;
  }
  io.out(values.json ? JSON.stringify({ id, revoked: true }) : `Revoked ${id}`);
  return 0;
}

async function migrateCommand(args: string[], io: CommandIo): Promise<number> {
  const { values } = parse(args, {}, 0);
  const config = await loadConfigWithModules(io.env);
  await (await openMigratedDatabase(config.database)).close();
  const database = describeDatabase(config.database);
  io.out(values.json ? JSON.stringify({ database, migrated: true }) : `${database} is at the latest schema`);
  return 0;
}

async function sweepCommand(args: string[], io: CommandIo): Promise<number> {
  const { values } = parse(args, {}, 0);
  const config = await loadConfigWithModules(io.env);
  const stores = await openStores(config);
  let result;
  try {
    result = await sweepDeployment(config, stores);
  } finally {
    await stores.close();
  }
  io.out(
    values.json
      ? JSON.stringify(result)
      : `Removed ${result.expired} expired file(s), ${result.orphans} orphaned blob(s) and ${result.staleUploads} stale upload(s)`,
  );
  return 0;
}

const GROUPINGS: readonly string[] = ['day', 'model', 'key'] satisfies UsageGrouping[];
/** The row of calls without a model: refused before one was chosen (a bad body, an unknown model, a limit). */
const NO_MODEL = '(refused before a model was chosen)';

const totalsJson = (totals: UsageTotals) => ({
  requests: totals.requests,
  answered: totals.answered,
  refused: totals.refused,
  input_tokens: totals.inputTokens,
  output_tokens: totals.outputTokens,
  cost_usd: totals.costUsd,
});

async function usageCommand(args: string[], io: CommandIo): Promise<number> {
  const { values } = parse(
    args,
    { account: { type: 'string' }, key: { type: 'string' }, since: { type: 'string' }, by: { type: 'string' } },
    0,
  );
  const by = values.by ?? 'day';
  if (!GROUPINGS.includes(by)) throw new UsageError(`--by must be day, model or key, got '${by}'`);
  const query: UsageQuery = { by: by as UsageGrouping };
  if (values.account !== undefined) query.account = accountOption(values.account);
  if (values.key !== undefined) query.keyId = values.key;
  if (values.since !== undefined) query.since = parseTime('--since', values.since);
  const config = await loadConfigWithModules(io.env);
  const report = await withDatabase(config, ({ knex }) => usageReport(new KnexUsageStore(knex), query));
  if (values.json) {
    io.out(JSON.stringify({ by, totals: totalsJson(report.totals), rows: report.rows.map((row) => ({ [by]: row.group, ...totalsJson(row) })) }));
    return 0;
  }
  const lines = [
    [by, 'requests', 'answered', 'refused', 'input_tokens', 'output_tokens', 'cost_usd'],
    ...report.rows.map((row) => [row.group ?? NO_MODEL, row.requests, row.answered, row.refused, row.inputTokens, row.outputTokens, row.costUsd]),
    ['total', report.totals.requests, report.totals.answered, report.totals.refused, report.totals.inputTokens, report.totals.outputTokens, report.totals.costUsd],
  ].map((cells) => cells.map(String));
  const widths = lines[0]!.map((_, column) => Math.max(...lines.map((cells) => cells[column]!.length)));
  for (const cells of lines) {
    io.out(cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[0]!) : cell.padStart(widths[column]!))).join('  '));
  }
  return 0;
}

async function serveCommand(args: string[], io: CommandIo): Promise<number> {
  parse(args, {}, 0);
  const config = await loadConfigWithModules(io.env);
  await serve(config, createLogger(config.logLevel));
  return 0;
}

/**
 * Runs one CLI command and returns its exit code. Throws `UsageError` for a bad command line and
 * `ConfigError` for a configuration the command cannot run with.
 */
export async function runCommand(argv: string[], io: CommandIo): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    io.out(USAGE);
    return command === undefined ? 2 : 0;
  }
  switch (command) {
    case 'serve':
      return serveCommand(rest, io);
    case 'migrate':
      return migrateCommand(rest, io);
    case 'sweep':
      return sweepCommand(rest, io);
    case 'usage':
      return usageCommand(rest, io);
    case 'keys': {
      const [sub, ...keyArgs] = rest;
      if (sub === 'create') return keysCreate(keyArgs, io);
      if (sub === 'list') return keysList(keyArgs, io);
      if (sub === 'revoke') return keysRevoke(keyArgs, io);
      throw new UsageError(sub === undefined ? 'keys needs a subcommand: create, list or revoke' : `unknown keys subcommand '${sub}'`);
    }
    case 'accounts': {
      const [sub, ...accountArgs] = rest;
      if (sub === 'set-limits') return accountsSetLimits(accountArgs, io);
      throw new UsageError(sub === undefined ? 'accounts needs a subcommand: set-limits' : `unknown accounts subcommand '${sub}'`);
    }
    case 'admin-tokens': {
      const [sub, ...tokenArgs] = rest;
      if (sub === 'create') return adminTokensCreate(tokenArgs, io);
      if (sub === 'list') return adminTokensList(tokenArgs, io);
      if (sub === 'revoke') return adminTokensRevoke(tokenArgs, io);
      throw new UsageError(
        sub === undefined ? 'admin-tokens needs a subcommand: create, list or revoke' : `unknown admin-tokens subcommand '${sub}'`,
      );
    }
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}

/**
 * `runCommand` as the command line runs it: every failure ends as one line on `io.err` and a
 * non-zero exit code (2 for a bad command line, 1 for anything else).
 */
export async function runCommandLine(argv: string[], io: CommandIo): Promise<number> {
  try {
    return await runCommand(argv, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`koa-model-gateway: ${err.message} (see koa-model-gateway --help)`);
      return 2;
    }
    io.err(err instanceof ConfigError ? `koa-model-gateway: ${err.message}` : `koa-model-gateway: unexpected error: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
}
