import { usdOfPico } from '../picodollars.js';
import type { UsageFilter, UsageRecord, UsageRecordFilter, UsageRollup, UsageRollupKey, UsageStore } from './usage-store.js';

export type UsageExportFormat = 'csv' | 'jsonl';

export const USAGE_EXPORT_FORMATS: readonly UsageExportFormat[] = ['csv', 'jsonl'];

/** A record's fields as the admin API and the exports name them: snake_case, its cost in USD, its time as Unix ms. */
export function usageRecordFields(record: UsageRecord) {
  return {
    request_id: record.requestId,
    time: record.time,
    account: record.account,
    key_id: record.keyId,
    endpoint: record.endpoint,
    model: record.model,
    deployment: record.provider,
    upstream_model: record.upstreamModel ?? null,
    status: record.status,
    stream: record.stream,
    attempts: record.attempts ?? 0,
    input_tokens: record.inputTokens,
    output_tokens: record.outputTokens,
    cost_usd: usdOfPico(record.costPicoUsd),
    latency_ms: record.latencyMs,
    upstream_first_byte_ms: record.upstreamFirstByteMs,
    upstream_ms: record.upstreamMs,
    trace_id: record.traceId ?? null,
    /** `hit`: answered from the response cache (at cost 0); `miss`: looked up, not found; null: not looked up. */
    cache: record.cache ?? null,
    /** On a hit, what the answer cost when it was made. */
    cost_saved_usd: usdOfPico(record.costSavedPicoUsd ?? 0),
  };
}

type ExportedRecord = Omit<ReturnType<typeof usageRecordFields>, 'time'> & { time: string };

const COLUMNS = Object.keys(
  usageRecordFields({
    time: 0,
    requestId: '',
    keyId: '',
    account: '',
    endpoint: '',
    model: null,
    provider: null,
    status: 0,
    stream: false,
    inputTokens: 0,
    outputTokens: 0,
    attachments: 0,
    latencyMs: 0,
    upstreamFirstByteMs: null,
    upstreamMs: null,
    costPicoUsd: 0,
  }),
) as Array<keyof ExportedRecord>;

// RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled; null is empty.
const csvField = (value: unknown) => {
  const text = value === null ? '' : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
};

/** A roll-up row's fields as the exports name them. */
const rollupFields = (row: UsageRollup) => ({
  period: new Date(row.period).toISOString(),
  account: row.account,
  key_id: row.keyId,
  model: row.model,
  endpoint: row.endpoint,
  status: row.status,
  requests: row.requests,
  input_tokens: row.inputTokens,
  output_tokens: row.outputTokens,
  cost_usd: usdOfPico(row.costPicoUsd),
  cache_hits: row.cacheHits,
  cost_saved_usd: usdOfPico(row.costSavedPicoUsd),
});

const ROLLUP_COLUMNS = [
  'period',
  'account',
  'key_id',
  'model',
  'endpoint',
  'status',
  'requests',
  'input_tokens',
  'output_tokens',
  'cost_usd',
  'cache_hits',
  'cost_saved_usd',
] as const;

/** One exported line of `fields`: CSV in `columns`' order, or a JSON object. */
const line = <Fields extends Record<string, unknown>>(fields: Fields, columns: ReadonlyArray<keyof Fields>, format: UsageExportFormat) =>
  format === 'csv' ? columns.map((column) => csvField(fields[column])).join(',') : JSON.stringify(fields);

/**
 * The hourly or daily roll-ups (`period`) of `filter` (its account, key, `since` and `until`),
 * oldest first, one line each, as `exportUsage` writes the records: the figures per period,
 * account, key, model, endpoint and status, kept longer than the records. A page of `pageSize`
 * at a time (`UsageStore.rollups`).
 * @example for await (const line of exportUsageRollups(store, 'day', { since, until }, 'csv')) out.write(`${line}\n`)
 */
export async function* exportUsageRollups(
  store: Pick<UsageStore, 'rollups'>,
  period: 'hour' | 'day',
  filter: UsageFilter & { until?: number },
  format: UsageExportFormat,
  { pageSize = 1000 }: { pageSize?: number } = {},
): AsyncGenerator<string> {
  if (store.rollups === undefined) throw new TypeError('koa-model-gateway: exportUsageRollups() needs a UsageStore with rollups()');
  let after: UsageRollupKey | undefined;
  let header = format === 'csv';
  for (;;) {
    const rows = await store.rollups(period, filter, { limit: pageSize, ...(after === undefined ? {} : { after }) });
    if (header) yield ROLLUP_COLUMNS.join(',');
    header = false;
    for (const row of rows) yield line(rollupFields(row), ROLLUP_COLUMNS, format);
    if (rows.length < pageSize) return;
    after = rows.at(-1);
  }
}

/**
 * The usage records of `filter` (a `since` and an `until` bound it), newest first, one line each
 * (without its line break): CSV with a header line first, or JSON Lines; times in ISO 8601 (UTC).
 * Read a page of `pageSize` at a time (`UsageStore.page`), so that an export of any length holds
 * one page in memory.
 * @example for await (const line of exportUsage(store, { since, until }, 'csv')) out.write(`${line}\n`)
 */
export async function* exportUsage(
  store: Pick<UsageStore, 'page'>,
  filter: UsageRecordFilter,
  format: UsageExportFormat,
  { pageSize = 1000 }: { pageSize?: number } = {},
): AsyncGenerator<string> {
  if (store.page === undefined) throw new TypeError('koa-model-gateway: exportUsage() needs a UsageStore with page()');
  if (!USAGE_EXPORT_FORMATS.includes(format)) throw new TypeError(`koa-model-gateway: exportUsage() format must be one of ${USAGE_EXPORT_FORMATS.join(', ')}`);
  let cursor: string | undefined;
  let header = format === 'csv';
  do {
    const page = await store.page(filter, { limit: pageSize, ...(cursor === undefined ? {} : { cursor }) });
    // After the first page is read: a store that is down fails the export before its first line.
    if (header) yield COLUMNS.join(',');
    header = false;
    for (const record of page.records) {
      const fields: ExportedRecord = { ...usageRecordFields(record), time: new Date(record.time).toISOString() };
      yield line(fields, COLUMNS, format);
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
}
