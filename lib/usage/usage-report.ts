import type { UsageFilter, UsageGrouping, UsageRow, UsageStore } from './usage-store.js';

/** What a usage report covers and how its rows are grouped. */
export interface UsageQuery extends UsageFilter {
  /** Default `'day'`. */
  by?: UsageGrouping;
}

export interface UsageTotals {
  requests: number;
  inputTokens: number;
  outputTokens: number;
}

export interface UsageReport {
  by: UsageGrouping;
  /** Every record the query covers, whatever its group. */
  totals: UsageTotals;
  /** One row per group: days in order, models and keys by id (calls without a model last). */
  rows: UsageRow[];
}

const GROUPINGS: readonly UsageGrouping[] = ['day', 'model', 'key'];

// Byte order, the same on every store and locale; `null` after every id.
function compareGroups(a: UsageRow, b: UsageRow): number {
  if (a.group === b.group) return 0;
  if (a.group === null) return 1;
  if (b.group === null) return -1;
  return a.group < b.group ? -1 : 1;
}

/**
 * Totals (requests, input and output tokens) and rows grouped by UTC day, model or key, of the
 * usage records of one account, one key and/or since a time: what `koa-model-gateway usage` prints
 * and an admin endpoint answers. Every record counts as a request, refused and failed calls included
 * (their tokens are 0). A `query` that is not one is a `TypeError`: validate client input first.
 * @example const { totals, rows } = await usageReport(new KnexUsageStore(knex), { account: 'acme', since: Date.parse('2030-01-01'), by: 'model' })
 */
export async function usageReport(store: UsageStore, query: UsageQuery = {}): Promise<UsageReport> {
  const { by = 'day', ...filter } = query;
  if (!GROUPINGS.includes(by)) throw new TypeError(`koa-model-gateway: usageReport() by must be one of ${GROUPINGS.join(', ')}`);
  if (filter.since !== undefined && !Number.isFinite(filter.since)) {
    throw new TypeError('koa-model-gateway: usageReport() since must be Unix milliseconds');
  }
  const rows = (await store.summarize(filter, by)).sort(compareGroups);
  const totals: UsageTotals = { requests: 0, inputTokens: 0, outputTokens: 0 };
  for (const row of rows) {
    totals.requests += row.requests;
    totals.inputTokens += row.inputTokens;
    totals.outputTokens += row.outputTokens;
  }
  return { by, totals, rows };
}
