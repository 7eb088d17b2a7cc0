import { z } from 'zod';
import type { UsageReport, UsageGroupTotals, UsageTotals } from '../usage/usage-report.js';
import type { UsageGrouping } from '../usage/usage-store.js';
import { LATEST_SECONDS, accountName, keyIdParameter } from './key-fields.js';

const GROUPINGS = ['day', 'model', 'key'] as const satisfies readonly UsageGrouping[];

const SINCE =
  'must be Unix seconds (1893456000), an ISO 8601 date (2030-01-01, midnight UTC) or an ISO 8601 time with seconds and an offset (2030-01-01T12:00:00Z)';
const BY = `must be one of ${GROUPINGS.join(', ')}`;
const SERIES = `must be one of ${GROUPINGS.join(', ')}, other than 'by'`;

const isoDay = z.iso.date();
const isoTime = z.iso.datetime({ offset: true, precision: 0 });

/** A `since` query parameter as Unix seconds: the admin API's unit of time, and ISO 8601 for people typing a URL. */
export const sinceParameter = z.string({ error: SINCE }).transform((value, ctx) => {
  const seconds = /^\d{1,12}$/.test(value)
    ? Number(value)
    : isoDay.safeParse(value).success || isoTime.safeParse(value).success
      ? Date.parse(value) / 1000
      : Number.NaN;
  if (Number.isNaN(seconds) || seconds > LATEST_SECONDS) {
    ctx.addIssue({ code: 'custom', message: SINCE });
    return z.NEVER;
  }
  return seconds;
});

/**
 * The query of `GET /admin/v1/usage`: every parameter optional, none repeated, none unknown.
 * `series` splits each row by a second grouping.
 */
export const usageQuerySchema = z
  .strictObject({
    account: accountName.optional(),
    key: keyIdParameter.optional(),
    since: sinceParameter.optional(),
    by: z.enum(GROUPINGS, { error: BY }).default('day'),
    series: z.enum(GROUPINGS, { error: SERIES }).optional(),
  })
  .refine((query) => query.series !== query.by, { error: SERIES, path: ['series'] });

export type UsageQueryParameters = z.output<typeof usageQuerySchema>;

/** Usage totals as the admin API and the CLI's `usage --json` give them. */
export const totalsJson = (totals: UsageTotals) => ({
  requests: totals.requests,
  answered: totals.answered,
  refused: totals.refused,
  input_tokens: totals.inputTokens,
  output_tokens: totals.outputTokens,
  cost_usd: totals.costUsd,
  cache_hits: totals.cacheHits,
  cost_saved_usd: totals.costSavedUsd,
});

const groupJson = (grouping: UsageGrouping, row: UsageGroupTotals) => ({ [grouping]: row.group, ...totalsJson(row) });

/**
 * A usage report as the admin API answers it: snake_case, the query's filters beside the figures
 * (`since` in Unix seconds), each row's group under the name of its grouping (`day`, `model`, `key`).
 */
export function usageObject(query: UsageQueryParameters, report: UsageReport) {
  const { series } = report;
  return {
    object: 'usage' as const,
    by: report.by,
    series,
    account: query.account ?? null,
    key: query.key ?? null,
    since: query.since ?? null,
    totals: totalsJson(report.totals),
    data: report.rows.map((row) => ({
      ...groupJson(report.by, row),
      ...(series === null ? {} : { series: (row.series ?? []).map((entry) => groupJson(series, entry)) }),
    })),
  };
}
