import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { ApiKeyRecord } from '../lib/auth/key-store.js';
import { createApiKey } from '../lib/auth/keys.js';
import { SCOPES, isScope, type Scope } from '../lib/auth/scopes.js';
import { KnexKeyStore } from '../lib/stores/knex/key-store.js';
import { loadConfig, type ServerConfig } from './config.js';
import { describeDatabase, openMigratedDatabase } from './database.js';
import { openStores, sweepDeployment } from './deployment.js';
import { createLogger } from './logger.js';
import { serve } from './server.js';

export const USAGE = `Usage: koa-model-gateway <command> [options]

Commands:
  serve                                 serve the API until SIGTERM/SIGINT
  migrate                               bring the database to the latest schema
  keys create --account <id> [--scope <scope>]... [--model <model>]... [--expires <iso-time>]
                                        create a key and print it, once (no --scope: every scope)
  keys list [--account <id>]            list keys (never the keys themselves)
  keys revoke <key-id>                  revoke a key
  sweep                                 remove expired files and orphaned blobs now

Options:
  --json                                print one JSON document
  --help                                print this text

Environment: PORT, HOST, DATA_DIR, DATABASE_URL, REDIS_URL, FILES_DIR, GATEWAY_CONFIG, LOG_LEVEL,
  SHUTDOWN_GRACE_SECONDS
Scopes: ${SCOPES.join(', ')}`;

/** A command line that does not say what to do: printed with a pointer to --help, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export interface CommandIo {
  env: Readonly<Record<string, string | undefined>>;
  out(text: string): void;
  err(text: string): void;
}

type Options = NonNullable<ParseArgsConfig['options']>;

function parse<O extends Options>(args: string[], options: O, positionals: number) {
  let parsed;
  try {
    parsed = parseArgs({ args, options: { ...options, json: { type: 'boolean' } }, allowPositionals: positionals > 0, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (parsed.positionals.length !== positionals) {
    throw new UsageError(positionals === 0 ? `unexpected argument '${parsed.positionals[0]}'` : 'expected exactly one key id');
  }
  return parsed;
}

async function withKeys<T>(config: ServerConfig, use: (keys: KnexKeyStore) => Promise<T>): Promise<T> {
  const database = await openMigratedDatabase(config.database);
  try {
    return await use(new KnexKeyStore(database.knex, database.storeOptions));
  } finally {
    await database.close();
  }
}

const iso = (seconds: number | null) => (seconds === null ? 'never' : new Date(seconds * 1000).toISOString());

function parseExpiry(value: string | undefined): number | null {
  if (value === undefined) return null;
  const ms = /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(ms)) throw new UsageError(`--expires must be an ISO 8601 time such as 2030-01-31T00:00:00Z, got '${value}'`);
  if (ms <= Date.now()) throw new UsageError('--expires must be in the future');
  return Math.floor(ms / 1000);
}

async function keysCreate(args: string[], io: CommandIo): Promise<number> {
  const { values } = parse(
    args,
    {
      account: { type: 'string' },
      scope: { type: 'string', multiple: true },
      model: { type: 'string', multiple: true },
      expires: { type: 'string' },
    },
    0,
  );
  const account = values.account?.trim();
  if (!account) throw new UsageError('keys create needs --account <id>');
  const scopes: Scope[] = [];
  for (const scope of values.scope ?? SCOPES) {
    if (!isScope(scope)) throw new UsageError(`unknown scope '${scope}' (scopes: ${SCOPES.join(', ')})`);
    if (!scopes.includes(scope)) scopes.push(scope);
  }
  const models = values.model ? [...new Set(values.model)] : null;
  const expiresAt = parseExpiry(values.expires);
  const config = loadConfig(io.env);
  const catalog = new Set(config.gateway.models.map((model) => model.id));
  // Allowed, since the catalog may grow, but most likely a typo.
  for (const model of models ?? []) if (!catalog.has(model)) io.err(`koa-model-gateway: warning: model '${model}' is not in the catalog`);
  const { key, record } = await withKeys(config, (keys) =>
    createApiKey(keys, { prefix: config.gateway.keyPrefix, account, scopes, models, expiresAt }),
  );
  if (values.json) {
    io.out(JSON.stringify({ id: record.id, key, account, scopes, models }));
  } else {
    io.out(
      [
        `Created ${record.id} for account ${account}`,
        `  scopes:  ${scopes.join(', ')}`,
        `  models:  ${models === null ? 'every model' : models.join(', ')}`,
        `  expires: ${iso(expiresAt)}`,
        '',
        key,
        '',
        'This is the only time the key is shown: store it now.',
      ].join('\n'),
    );
  }
  return 0;
}

function keyJson(record: ApiKeyRecord) {
  return {
    id: record.id,
    account: record.account,
    scopes: record.scopes,
    models: record.models,
    created_at: record.createdAt,
    expires_at: record.expiresAt,
    revoked_at: record.revokedAt,
  };
}

function keyStatus(record: ApiKeyRecord, now: number): string {
  if (record.revokedAt !== null) return 'revoked';
  if (record.expiresAt !== null && now >= record.expiresAt) return 'expired';
  return 'active';
}

async function keysList(args: string[], io: CommandIo): Promise<number> {
  const { values } = parse(args, { account: { type: 'string' } }, 0);
  const config = loadConfig(io.env);
  const filter = values.account === undefined ? {} : { account: values.account };
  const records = await withKeys(config, (keys) => keys.list(filter));
  if (values.json) {
    io.out(JSON.stringify(records.map(keyJson)));
    return 0;
  }
  if (records.length === 0) {
    io.out('No keys.');
    return 0;
  }
  const now = Date.now() / 1000;
  for (const record of records) {
    const models = record.models === null ? 'every model' : record.models.join(',') || '(none)';
    io.out(
      `${record.id}  ${record.account}  ${keyStatus(record, now)}  created ${iso(record.createdAt)}  expires ${iso(record.expiresAt)}  scopes ${record.scopes.join(',')}  models ${models}`,
    );
  }
  return 0;
}

async function keysRevoke(args: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parse(args, {}, 1);
  const id = positionals[0] as string;
  const config = loadConfig(io.env);
  const revoked = await withKeys(config, (keys) => keys.revoke(id));
  if (!revoked) {
    io.err(`koa-model-gateway: no key with id '${id}'`);
    return 1;
  }
  io.out(values.json ? JSON.stringify({ id, revoked: true }) : `Revoked ${id}`);
  return 0;
}

async function migrateCommand(args: string[], io: CommandIo): Promise<number> {
  const { values } = parse(args, {}, 0);
  const config = loadConfig(io.env);
  await (await openMigratedDatabase(config.database)).close();
  const database = describeDatabase(config.database);
  io.out(values.json ? JSON.stringify({ database, migrated: true }) : `${database} is at the latest schema`);
  return 0;
}

async function sweepCommand(args: string[], io: CommandIo): Promise<number> {
  const { values } = parse(args, {}, 0);
  const config = loadConfig(io.env);
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

async function serveCommand(args: string[], io: CommandIo): Promise<number> {
  parse(args, {}, 0);
  const config = loadConfig(io.env);
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
    case 'keys': {
      const [sub, ...keyArgs] = rest;
      if (sub === 'create') return keysCreate(keyArgs, io);
      if (sub === 'list') return keysList(keyArgs, io);
      if (sub === 'revoke') return keysRevoke(keyArgs, io);
      throw new UsageError(sub === undefined ? 'keys needs a subcommand: create, list or revoke' : `unknown keys subcommand '${sub}'`);
    }
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}
