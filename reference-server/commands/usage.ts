import {
  exportUsage,
  exportUsageRollups,
  USAGE_EXPORT_FORMATS,
  usageReport,
  type UsageExportFormat,
  type UsageGrouping,
  type UsageQuery,
} from 'koa-model-gateway/usage';
import { KnexUsageStore } from 'koa-model-gateway/stores/knex';
import { KEY_ID_RULE, keyIdParameter } from '../../lib/admin/key-fields.js';
import { totalsJson } from '../../lib/admin/usage-query.js';
import { loadConfigWithModules } from '../config.js';
import { UsageError, accountOption, parseCommand, parseTime, withDatabase, type CommandIo } from './command-line.js';

const GROUPINGS: readonly string[] = ['day', 'model', 'key'] satisfies UsageGrouping[];
/** The row of calls without a model: refused before one was chosen (a bad body, an unknown model, a limit). */
const NO_MODEL = '(refused before a model was chosen)';

/** `usage`: the model calls' requests, tokens and cost, in totals and rows per day, model or key; `usage export`: their records. */
export async function usageCommand(args: string[], io: CommandIo): Promise<number> {
  if (args[0] === 'export') return usageExportCommand(args.slice(1), io);
  const { values } = parseCommand(args, { account: { type: 'string' }, key: { type: 'string' }, since: { type: 'string' }, by: { type: 'string' } }, 0);
  const by = values.by ?? 'day';
  if (!GROUPINGS.includes(by)) throw new UsageError(`--by must be day, model or key, got '${by}'`);
  const query: UsageQuery = { by: by as UsageGrouping };
  if (values.account !== undefined) query.account = accountOption(values.account);
  if (values.key !== undefined) {
    if (!keyIdParameter.safeParse(values.key).success) throw new UsageError(`--key ${KEY_ID_RULE}`);
    query.keyId = values.key;
  }
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
    [
      'total',
      report.totals.requests,
      report.totals.answered,
      report.totals.refused,
      report.totals.inputTokens,
      report.totals.outputTokens,
      report.totals.costUsd,
    ],
  ].map((cells) => cells.map(String));
  const widths = lines[0]!.map((_, column) => Math.max(...lines.map((cells) => cells[column]!.length)));
  for (const cells of lines) {
    io.out(cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[0]!) : cell.padStart(widths[column]!))).join('  '));
  }
  return 0;
}

/** `usage export --since --until --format csv|jsonl [--rollups hour|day]`: every usage record (or roll-up row) of the period, one a line (`exportUsage`). */
async function usageExportCommand(args: string[], io: CommandIo): Promise<number> {
  const { values } = parseCommand(
    args,
    { since: { type: 'string' }, until: { type: 'string' }, format: { type: 'string' }, account: { type: 'string' }, rollups: { type: 'string' } },
    0,
  );
  if (values.since === undefined) throw new UsageError('--since is required: the start of the period to export');
  const format = values.format ?? 'csv';
  if (!(USAGE_EXPORT_FORMATS as readonly string[]).includes(format)) throw new UsageError(`--format must be csv or jsonl, got '${format}'`);
  const { rollups } = values;
  if (rollups !== undefined && rollups !== 'hour' && rollups !== 'day') throw new UsageError(`--rollups must be hour or day, got '${rollups}'`);
  const filter = {
    since: parseTime('--since', values.since),
    ...(values.until === undefined ? {} : { until: parseTime('--until', values.until) }),
    ...(values.account === undefined ? {} : { account: accountOption(values.account) }),
  };
  const config = await loadConfigWithModules(io.env);
  await withDatabase(config, async ({ knex }) => {
    const store = new KnexUsageStore(knex);
    const lines =
      rollups === undefined ? exportUsage(store, filter, format as UsageExportFormat) : exportUsageRollups(store, rollups, filter, format as UsageExportFormat);
    for await (const line of lines) io.out(line);
  });
  return 0;
}
