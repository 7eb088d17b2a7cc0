import { usdOfPico } from '../picodollars.js';
import type { UsageFilter, UsageGrouping, UsageRow, UsageStore } from './usage-store.js';

/** What a usage report covers and how its rows are grouped. */
export interface UsageQuery extends UsageFilter {
  /** Default `'day'`. */
  by?: UsageGrouping;
  /** Another grouping than `by`: each row is then split into `series` by it (a day's calls by model, say). */
  series?: UsageGrouping;
}

export interface UsageTotals {
  requests: number;
  /** The requests answered (a 2xx status). */
  answered: number;
  /** The requests refused or failed (a 4xx or 5xx status): `requests - answered`. */
  refused: number;
  inputTokens: number;
  outputTokens: number;
  /** What the calls cost, in USD: summed exactly (in picodollars), then read as the nearest number. */
  costUsd: number;
  /** The requests answered from the response cache. */
  cacheHits: number;
  /** What those answers cost when they were made, in USD: what the cache saved. */
  costSavedUsd: number;
}

/** The figures of one group of a report: a day, a model or a key. */
export interface UsageGroupTotals extends UsageTotals {
  /** The day (`2030-01-31`, UTC), model id or key id; `null` for calls without a model. */
  group: string | null;
}

/** One row of a report; with a `series` grouping, its figures split by it as well. */
export interface UsageReportRow extends UsageGroupTotals {
  /** Set when the query has `series`: the row's figures by that grouping, which add up to the row's. */
  series?: UsageGroupTotals[];
}

export interface UsageReport {
  by: UsageGrouping;
  /** The query's `series`, or `null`. */
  series: UsageGrouping | null;
  /** Every record the query covers, whatever its group. */
  totals: UsageTotals;
  /** One row per group: days in order, models and keys by id (calls without a model last); so are the series of a row. */
  rows: UsageReportRow[];
}

const GROUPINGS: readonly UsageGrouping[] = ['day', 'model', 'key'];

// Byte order, the same on every store and locale; `null` after every id.
function compareGroups(a: string | null, b: string | null): number {
  if (a === b) return 0;
  if (a === null) return 1;
  if (b === null) return -1;
  return a < b ? -1 : 1;
}

const byGroup = (a: UsageGroupTotals, b: UsageGroupTotals) => compareGroups(a.group, b.group);

/** Figures as they are summed: the cost in picodollars, exact. */
type Sum = Omit<UsageTotals, 'costUsd' | 'refused' | 'costSavedUsd'> & { costPicoUsd: bigint; costSavedPicoUsd: bigint };

const zero = (): Sum => ({ requests: 0, answered: 0, inputTokens: 0, outputTokens: 0, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n });

function add(totals: Sum, row: Sum): void {
  totals.requests += row.requests;
  totals.answered += row.answered;
  totals.inputTokens += row.inputTokens;
  totals.outputTokens += row.outputTokens;
  totals.costPicoUsd += row.costPicoUsd;
  totals.cacheHits += row.cacheHits;
  totals.costSavedPicoUsd += row.costSavedPicoUsd;
}

const figures = (row: Sum): UsageTotals => ({
  requests: row.requests,
  answered: row.answered,
  refused: row.requests - row.answered,
  inputTokens: row.inputTokens,
  outputTokens: row.outputTokens,
  costUsd: usdOfPico(row.costPicoUsd),
  cacheHits: row.cacheHits,
  costSavedUsd: usdOfPico(row.costSavedPicoUsd),
});

/** The store's rows of (group, subgroup) pairs as one row per group with its series. */
function withSeries(rows: UsageRow[]): Array<UsageReportRow & { sum: Sum }> {
  const groups = new Map<string | null, { sum: Sum; series: UsageGroupTotals[] }>();
  for (const row of rows) {
    let group = groups.get(row.group);
    if (group === undefined) {
      group = { sum: zero(), series: [] };
      groups.set(row.group, group);
    }
    add(group.sum, row);
    group.series.push({ group: row.subgroup ?? null, ...figures(row) });
  }
  return [...groups].map(([group, { sum, series }]) => ({ group, ...figures(sum), series: series.sort(byGroup), sum }));
}

/**
 * Totals (requests, input and output tokens, cost in USD, cache hits and what they saved) and rows grouped by UTC day, model or key, of the
 * usage records of one account, one key and/or since a time, each row split by a second grouping
 * when `series` is given: what `koa-model-gateway usage` prints and `GET /admin/v1/usage` answers.
 * Every record counts as a request, refused and failed calls included (their tokens are 0), and
 * requests are split into `answered` (a 2xx status) and `refused` (4xx, 5xx). A
 * `query` that is not one is a `TypeError`: validate client input first.
 * @example const { totals, rows } = await usageReport(new KnexUsageStore(knex), { account: 'acme', since: Date.parse('2030-01-01'), by: 'day', series: 'model' })
 */
export async function usageReport(store: Pick<UsageStore, 'summarize'>, query: UsageQuery = {}): Promise<UsageReport> {
  const { by = 'day', series, ...filter } = query;
  if (!GROUPINGS.includes(by)) throw new TypeError(`koa-model-gateway: usageReport() by must be one of ${GROUPINGS.join(', ')}`);
  if (series !== undefined && (!GROUPINGS.includes(series) || series === by)) {
    throw new TypeError(`koa-model-gateway: usageReport() series must be one of ${GROUPINGS.join(', ')}, other than by`);
  }
  if (filter.since !== undefined && !Number.isFinite(filter.since)) {
    throw new TypeError('koa-model-gateway: usageReport() since must be Unix milliseconds');
  }
  const stored = await store.summarize(filter, by, series);
  const rows = (series === undefined ? stored.map((row) => ({ group: row.group, ...figures(row), sum: row })) : withSeries(stored)).sort(byGroup);
  const totals = zero();
  for (const row of rows) add(totals, row.sum);
  return { by, series: series ?? null, totals: figures(totals), rows: rows.map(({ sum: _sum, ...row }) => row) };
}
