import { usdOfPico } from '../picodollars.js';
import type { UsageRecord, UsageRecordFilter, UsageStore } from './usage-store.js';

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
  };
}

type ExportedRecord = Omit<ReturnType<typeof usageRecordFields>, 'time'> & { time: string };

const COLUMNS = Object.keys(usageRecordFields({
  time: 0, requestId: '', keyId: '', account: '', endpoint: '', model: null, provider: null, status: 0, stream: false,
  inputTokens: 0, outputTokens: 0, attachments: 0, latencyMs: 0, upstreamFirstByteMs: null, upstreamMs: null, costPicoUsd: 0,
})) as Array<keyof ExportedRecord>;

// RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled; null is empty.
const csvField = (value: unknown) => {
  const text = value === null ? '' : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
};

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
      yield format === 'csv' ? COLUMNS.map((column) => csvField(fields[column])).join(',') : JSON.stringify(fields);
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
}
