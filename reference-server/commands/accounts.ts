import { accountBudgetFields, changedValues } from 'koa-model-gateway/admin';
import { ALERT_THRESHOLDS_RULE, BUDGET_RULE, parseAlertThresholds, parseBudgetUsd, type BudgetChanges } from 'koa-model-gateway/cost';
import { isMcpToolGlob, MCP_TOOL_GLOB_RULE } from '../../lib/mcp/tool-grants.js';
import { KnexAccountBudgetStore, KnexMcpGrantStore } from 'koa-model-gateway/stores/knex';
import { loadConfigWithModules } from '../config.js';
import { recordCliAction } from './audit.js';
import { UsageError, accountOption, parseCommand, withDatabase, type CommandIo } from './command-line.js';

/** The budget options of `keys create` and `accounts set-limits`, and the limit each sets. */
export const BUDGET_OPTIONS = { 'cost-per-day': 'costPerDay', 'cost-per-month': 'costPerMonth' } as const;

/** The options of `keys create`, `keys update` and `accounts set-limits` that say how budgets alert, and the field each sets. */
export const ALERT_OPTIONS = { 'cost-soft': 'costSoft', 'cost-alert-thresholds': 'costAlertThresholds' } as const;

/** `--cost-soft true|false`: whether budgets only alert, never refusing a call. */
export function parseCostSoft(value: string): boolean {
  if (value !== 'true' && value !== 'false') throw new UsageError(`--cost-soft must be true or false, got '${value}'`);
  return value === 'true';
}

/** `--cost-alert-thresholds 50,80,100`: the percents of a budget that alert, the admin API's rule. */
export function parseCostAlertThresholds(value: string): number[] {
  const percents = parseAlertThresholds(value);
  if (percents === undefined) throw new UsageError(`--cost-alert-thresholds ${ALERT_THRESHOLDS_RULE}, separated by commas, got '${value}'`);
  return percents;
}

/** A budget in USD as an option gives it: the admin API's and the configuration file's rule and number syntax. */
export function parseBudget(option: string, value: string): number {
  const usd = parseBudgetUsd(value);
  if (usd === undefined) throw new UsageError(`--${option} ${BUDGET_RULE}, got '${value}'`);
  return usd;
}

/**
 * `accounts set-limits <account> [--cost-per-day <usd>|none] [--cost-per-month <usd>|none]
 * [--cost-soft true|false] [--cost-alert-thresholds <percents>|none]`: sets or removes an account's
 * budgets, makes them soft (they alert and never refuse), gives them their own alert thresholds.
 */
async function accountsSetLimits(args: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseCommand(
    args,
    {
      'cost-per-day': { type: 'string' },
      'cost-per-month': { type: 'string' },
      'cost-soft': { type: 'string' },
      'cost-alert-thresholds': { type: 'string' },
    },
    1,
    'accounts set-limits needs exactly one account',
  );
  const account = accountOption(positionals[0] as string);
  const changes: BudgetChanges = {};
  for (const [option, field] of Object.entries(BUDGET_OPTIONS)) {
    const value = values[option as keyof typeof BUDGET_OPTIONS];
    if (value !== undefined) changes[field] = value === 'none' ? null : parseBudget(option, value);
  }
  if (values['cost-soft'] !== undefined) changes.costSoft = parseCostSoft(values['cost-soft']);
  const thresholds = values['cost-alert-thresholds'];
  if (thresholds !== undefined) changes.costAlertThresholds = thresholds === 'none' ? null : parseCostAlertThresholds(thresholds);
  if (Object.keys(changes).length === 0)
    throw new UsageError('accounts set-limits needs --cost-per-day, --cost-per-month, --cost-soft or --cost-alert-thresholds');
  const budget = await withDatabase(await loadConfigWithModules(io.env), async (database) => {
    const store = new KnexAccountBudgetStore(database.knex, database.storeOptions);
    const before = await store.get(account);
    const set = await store.set(account, changes);
    const values = changedValues(accountBudgetFields(before), accountBudgetFields(set), Object.keys(changes));
    await recordCliAction(database, { action: 'account.limits_set', account, fields: Object.keys(changes), changes: values }, io);
    return set;
  });
  const fields = accountBudgetFields(budget);
  const text = (usd: number | null) => (usd === null ? 'none' : `${usd} USD`);
  const alerts = fields.costAlertThresholds === null ? '' : `, alerts at ${fields.costAlertThresholds.map((percent) => `${percent}%`).join(', ')}`;
  io.out(
    values.json
      ? JSON.stringify({ account, ...fields })
      : `Budgets of ${account}: ${text(fields.costPerDay)} per day, ${text(fields.costPerMonth)} per month${fields.costSoft ? ', soft (alerts only)' : ''}${alerts}`,
  );
  return 0;
}

/**
 * The globs of `--mcp-tools`, comma-separated and/or repeated: `github/*,search/web_search`;
 * `none` is the empty grant.
 */
export function parseMcpTools(values: string[]): string[] {
  const globs = values
    .flatMap((value) => value.split(','))
    .map((glob) => glob.trim())
    .filter((glob) => glob !== '' && glob !== 'none');
  const invalid = globs.find((glob) => !isMcpToolGlob(glob));
  if (invalid !== undefined) throw new UsageError(`--mcp-tools ${MCP_TOOL_GLOB_RULE.replace(/^must be an array of globs/, 'takes globs')}, got '${invalid}'`);
  return [...new Set(globs)];
}

/** `accounts set-mcp-tools <account> --mcp-tools <globs>|none`: replaces an account's MCP grant. */
async function accountsSetMcpTools(args: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseCommand(
    args,
    { 'mcp-tools': { type: 'string', multiple: true } },
    1,
    'accounts set-mcp-tools needs exactly one account',
  );
  const account = accountOption(positionals[0] as string);
  if (values['mcp-tools'] === undefined) throw new UsageError('accounts set-mcp-tools needs --mcp-tools <globs> (or none)');
  const tools = parseMcpTools(values['mcp-tools']);
  const kept = await withDatabase(await loadConfigWithModules(io.env), async (database) => {
    const set = await new KnexMcpGrantStore(database.knex, database.storeOptions).set(account, tools);
    await recordCliAction(database, { action: 'account.mcp_tools_set', account, fields: ['mcp_tools'] }, io);
    return set;
  });
  io.out(values.json ? JSON.stringify({ account, mcp_tools: kept }) : `MCP tools of ${account}: ${kept.length === 0 ? 'none' : kept.join(', ')}`);
  return 0;
}

/** `accounts set-limits`, `accounts set-mcp-tools`: an account's budgets and MCP grant, over all its keys. */
export async function accountsCommand([sub, ...args]: string[], io: CommandIo): Promise<number> {
  if (sub === 'set-limits') return accountsSetLimits(args, io);
  if (sub === 'set-mcp-tools') return accountsSetMcpTools(args, io);
  throw new UsageError(sub === undefined ? 'accounts needs a subcommand: set-limits, set-mcp-tools' : `unknown accounts subcommand '${sub}'`);
}
