import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ACCOUNT_NAME_RULE, canonicalAccountName } from '../../lib/auth/account-name.js';
import { ConfigError } from '../config-error.js';
import type { ServerConfig } from '../config.js';
import type { Database } from '../database.js';

/** A command line that does not say what to do: printed with a pointer to --help, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export interface CommandIo {
  env: Readonly<Record<string, string | undefined>>;
  out(text: string): void;
  err(text: string): void;
}

/** One command: its arguments after the command's (and subcommand's) name, and its exit code. */
export type Command = (args: string[], io: CommandIo) => Promise<number>;

type Options = NonNullable<ParseArgsConfig['options']>;

/** What `parseCommand` gives: named, since node:util does not export the type of `parseArgs`' result. */
type ParsedCommand<O extends Options> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O & { json: { type: 'boolean' } }; allowPositionals: boolean; strict: true }>
>;

/**
 * A command's `args` by `options` (and `--json`, which every command takes), with exactly
 * `positionals` arguments besides, else a `UsageError` (`wrongCount` when their number is wrong).
 */
export function parseCommand<O extends Options>(args: string[], options: O, positionals: 0 | 1, wrongCount = 'expected exactly one id'): ParsedCommand<O> {
  let parsed: ParsedCommand<O>;
  try {
    parsed = parseArgs({
      args: withNegativeValues(args, options),
      options: { ...options, json: { type: 'boolean' } },
      allowPositionals: positionals > 0,
      strict: true,
    });
  } catch (err) {
    // node:util's messages can run to several lines ('--tpm -5' explains how to pass a dash): one is enough.
    throw new UsageError((err as Error).message.split('\n')[0]);
  }
  if (parsed.positionals.length !== positionals) {
    throw new UsageError(positionals === 0 ? `unexpected argument '${parsed.positionals[0]}'` : wrongCount);
  }
  return parsed;
}

const NEGATIVE_NUMBER = /^-\.?\d/;

/**
 * `args` with a negative number after an option that takes a value joined to it (`--cost-per-day=-1`):
 * node:util would take it for an option and call the value ambiguous; it is refused by the option's rule instead.
 */
function withNegativeValues(args: string[], options: Options): string[] {
  const joined: string[] = [];
  for (let index = 0; index < args.length; index++) {
    const [arg = '', next] = [args[index], args[index + 1]];
    const option = arg.startsWith('--') ? options[arg.slice(2)] : undefined;
    if (option?.type === 'string' && next !== undefined && NEGATIVE_NUMBER.test(next)) {
      joined.push(`${arg}=${next}`);
      index++;
    } else joined.push(arg);
  }
  return joined;
}

/** `--account` (or an account argument) as the key stores keep it, or a `UsageError` saying the rule. */
export function accountOption(value: string): string {
  const account = canonicalAccountName(value);
  if (account === undefined) throw new UsageError(`--account ${ACCOUNT_NAME_RULE}`);
  return account;
}

/** Unix ms of an ISO 8601 time (a date alone is its UTC midnight). */
export function parseTime(option: string, value: string): number {
  const ms = /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(ms)) throw new UsageError(`${option} must be an ISO 8601 time such as 2030-01-31T00:00:00Z, got '${value}'`);
  return ms;
}

/** A time in Unix seconds as the commands print it; `null`: never. */
export const isoTime = (seconds: number | null) => (seconds === null ? 'never' : new Date(seconds * 1000).toISOString());

/** The deployment's database, migrated and open for `use`, closed after. */
export async function withDatabase<T>(config: ServerConfig, use: (database: Database) => Promise<T>): Promise<T> {
  // Loaded here: `serve`'s thread, which parses its command line with this module, needs no driver.
  const { openMigratedDatabase } = await import('../database.js');
  const database = await openMigratedDatabase(config.database);
  try {
    return await use(database);
  } finally {
    await database.close();
  }
}

/** A command's failure as one line on `io.err`; returns the exit code (2 for a bad command line, 1 for anything else). */
export function reportFailure(err: unknown, io: CommandIo): number {
  if (err instanceof UsageError) {
    io.err(`koa-model-gateway: ${err.message} (see koa-model-gateway --help)`);
    return 2;
  }
  io.err(
    err instanceof ConfigError
      ? `koa-model-gateway: ${err.message}`
      : `koa-model-gateway: unexpected error: ${err instanceof Error ? err.message : String(err)}`,
  );
  return 1;
}
