import { SCOPES } from '../../lib/auth/scopes.js';
import { reportFailure, UsageError, type Command, type CommandIo } from './command-line.js';

export const USAGE = `Usage: koa-model-gateway <command> [options]

Commands:
  serve                                 serve the API until SIGTERM/SIGINT
  migrate                               bring the database to the latest schema
  keys create --account <id> [--name <text>] [--scope <scope>]... [--model <model>]...
              [--expires <iso-time>] [--rpm <n>] [--tpm <n>] [--tokens-per-day <n>]
              [--cost-per-day <usd>] [--cost-per-month <usd>] [--cost-soft true|false]
              [--cost-alert-thresholds <percent,...>] [--cache <seconds> [--cache-per-key]]
              [--mcp-tools <glob,...>]
                                        create a key and print it, once (no --scope: every scope;
                                        a limit left out: the deployment's default; no --mcp-tools:
                                        no MCP tool)
  keys list [--account <id>]            list keys (never the keys themselves)
  keys update <key-id> [--name <text>|none] [--scope <scope>]... [--model <model>]... | --every-model
              [--expires <iso-time>|never] [--rpm <n>|none] [--tpm <n>|none] [--tokens-per-day <n>|none]
              [--cost-per-day <usd>|none] [--cost-per-month <usd>|none] [--cost-soft true|false|none]
              [--cost-alert-thresholds <percent,...>|none]
                                        change the fields given (none: the default); every server sees it within a second
  keys rotate <key-id> [--grace <seconds>]
                                        a new key like the old one, printed once; the old one works --grace more (default 0)
  keys revoke <key-id>                  revoke a key; every server refuses it within a second
  accounts set-limits <account> [--cost-per-day <usd>|none] [--cost-per-month <usd>|none]
              [--cost-soft true|false] [--cost-alert-thresholds <percent,...>|none]
                                        set (or, with none, remove) an account's budgets, over all its keys;
                                        soft budgets alert and never refuse; thresholds: percents that alert
  accounts set-mcp-tools <account> --mcp-tools <glob,...>|none
                                        set the MCP tools ({server}/{tool} globs) an account's keys may
                                        be granted: a key's grant is the intersection with it
  admin-tokens create [--name <text>]   create an admin token (admin API, dashboard) and print it, once
  admin-tokens list                     list admin tokens (never the tokens themselves)
  admin-tokens revoke <token-id>        revoke an admin token and end its dashboard sessions
  sweep                                 remove expired files and orphaned blobs now
  usage [--account <id>] [--key <key-id>] [--since <iso-time>] [--by day|model|key]
                                        requests (answered: 2xx; refused: 4xx, 5xx), tokens and cost (USD)
                                        of model calls: totals, and rows per UTC day (default), model or key
  usage export --since <iso-time> [--until <iso-time>] [--format csv|jsonl] [--account <id>] [--rollups hour|day]
                                        every model call's usage record of the period, one a line, newest first
                                        (CSV with a header, the default, or JSON Lines); with --rollups, the
                                        hourly or daily figures per account, key, model, endpoint and status

Options:
  --json                                print one JSON document
  --help                                print this text

Environment: PORT, HOST, DATA_DIR, DATABASE_URL, REDIS_URL, FILES_DIR or BLOB_URL (with AWS_REGION
  or AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, S3_ENDPOINT,
  S3_FORCE_PATH_STYLE), GATEWAY_CONFIG, LOG_LEVEL, SHUTDOWN_GRACE_SECONDS, METRICS_PORT,
  USAGE_RETENTION_DAYS, USAGE_ROLLUP_RETENTION_DAYS,
  OTEL_EXPORTER_OTLP_ENDPOINT and the other OTEL_* variables (traces)
Scopes: ${SCOPES.join(', ')}`;

/**
 * Each command by its name, loaded when it runs: `serve` keeps only a thread that passes signals
 * on, which need not hold the database drivers the other commands load. A command with
 * subcommands picks one itself.
 */
const COMMANDS: ReadonlyMap<string, () => Promise<Command>> = new Map([
  ['serve', async () => (await import('./serve.js')).serveCommand],
  ['migrate', async () => (await import('./maintenance.js')).migrateCommand],
  ['sweep', async () => (await import('./maintenance.js')).sweepCommand],
  ['usage', async () => (await import('./usage.js')).usageCommand],
  ['keys', async () => (await import('./keys.js')).keysCommand],
  ['accounts', async () => (await import('./accounts.js')).accountsCommand],
  ['admin-tokens', async () => (await import('./admin-tokens.js')).adminTokensCommand],
]);

/** `--help` or `-h` anywhere before a `--`: the usage, whatever else the line says (`keys create --help`). */
function asksForHelp(argv: string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).some((arg) => arg === '--help' || arg === '-h');
}

/**
 * Runs one CLI command and returns its exit code. Throws `UsageError` for a bad command line and
 * `ConfigError` for a configuration the command cannot run with.
 */
export async function runCommand(argv: string[], io: CommandIo): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || asksForHelp(argv)) {
    io.out(USAGE);
    return command === undefined ? 2 : 0;
  }
  const load = COMMANDS.get(command);
  if (load === undefined) throw new UsageError(`unknown command '${command}'`);
  return (await load())(rest, io);
}

/**
 * `runCommand` as the command line runs it: every failure ends as one line on `io.err` and a
 * non-zero exit code (2 for a bad command line, 1 for anything else).
 */
export async function runCommandLine(argv: string[], io: CommandIo): Promise<number> {
  try {
    return await runCommand(argv, io);
  } catch (err) {
    return reportFailure(err, io);
  }
}
