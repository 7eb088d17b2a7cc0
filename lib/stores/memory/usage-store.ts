import { DAY_MS, HOUR_MS, mergeUsageRows, negatedUsageRows, usageHour, usageSpans } from '../../usage/usage-rollups.js';
import {
  usageDay,
  type UsageFilter,
  type UsageGrouping,
  type UsagePage,
  type UsagePruning,
  type UsageRecord,
  type UsageRecordFilter,
  type UsageRollup,
  type UsageRollupKey,
  type UsageRow,
  type UsageStore,
} from '../../usage/usage-store.js';

const matches = (record: UsageRecord, filter: UsageFilter) =>
  (filter.account === undefined || record.account === filter.account) &&
  (filter.keyId === undefined || record.keyId === filter.keyId) &&
  (filter.since === undefined || record.time >= filter.since);

/** The records of one period, account, key, model, endpoint and status, summed. */
interface Rollup {
  /** Unix ms of the UTC hour (read from the hourly roll-ups only). */
  hour: number;
  day: string;
  account: string;
  keyId: string;
  model: string | null;
  endpoint: string;
  status: number;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  costPicoUsd: bigint;
  /** The calls answered from the response cache. */
  cacheHits: number;
  costSavedPicoUsd: bigint;
}

/** What a record adds to a summary: one request, and a cache hit with what it saved if it is one. */
const recordFigures = (record: UsageRecord) => ({
  requests: 1,
  cacheHits: record.cache === 'hit' ? 1 : 0,
  costSavedPicoUsd: BigInt(record.costSavedPicoUsd ?? 0),
});
/** What a roll-up adds to a summary: its sums. */
const rollupFigures = (rollup: Rollup) => ({ requests: rollup.requests, cacheHits: rollup.cacheHits, costSavedPicoUsd: rollup.costSavedPicoUsd });

const GROUP_OF: Record<UsageGrouping, (row: { time?: number; day?: string; model: string | null; keyId: string }) => string | null> = {
  day: (row) => row.day ?? usageDay(row.time ?? 0),
  model: (row) => row.model,
  key: (row) => row.keyId,
};

function addTo(rollups: Map<string, Rollup>, id: unknown[], record: UsageRecord, hour: number): void {
  const key = JSON.stringify(id);
  let rollup = rollups.get(key);
  if (rollup === undefined) {
    const { account, keyId, model, endpoint, status } = record;
    rollup = {
      hour,
      day: usageDay(record.time),
      account,
      keyId,
      model,
      endpoint,
      status,
      requests: 0,
      inputTokens: 0,
      outputTokens: 0,
      costPicoUsd: 0n,
      cacheHits: 0,
      costSavedPicoUsd: 0n,
    };
    rollups.set(key, rollup);
  }
  const { requests, cacheHits, costSavedPicoUsd } = recordFigures(record);
  rollup.requests += requests;
  rollup.inputTokens += record.inputTokens;
  rollup.outputTokens += record.outputTokens;
  rollup.costPicoUsd += BigInt(record.costPicoUsd);
  rollup.cacheHits += cacheHits;
  rollup.costSavedPicoUsd += costSavedPicoUsd;
}

/** The order of roll-up rows: by period, then account, key, model (calls without one first, as '' sorts), endpoint and status. */
function compareRollupKeys(a: UsageRollupKey, b: UsageRollupKey): number {
  const tuple = (key: UsageRollupKey) => [key.period, key.account, key.keyId, key.model ?? '', key.endpoint, key.status] as const;
  const [x, y] = [tuple(a), tuple(b)];
  for (let index = 0; index < x.length; index++) {
    if (x[index] !== y[index]) return (x[index] as string | number) < (y[index] as string | number) ? -1 : 1;
  }
  return 0;
}

/** Sums rows (records, each one request, or roll-ups) by `by` and `thenBy`. */
function summed<
  Row extends {
    day?: string;
    time?: number;
    model: string | null;
    keyId: string;
    status: number;
    inputTokens: number;
    outputTokens: number;
    costPicoUsd: number | bigint;
  },
>(
  rows: Iterable<Row>,
  figuresOf: (row: Row) => { requests: number; cacheHits: number; costSavedPicoUsd: bigint },
  by: UsageGrouping,
  thenBy: UsageGrouping | undefined,
): UsageRow[] {
  const sums = new Map<string, UsageRow>();
  for (const row of rows) {
    const group = GROUP_OF[by](row);
    const subgroup = thenBy === undefined ? undefined : GROUP_OF[thenBy](row);
    const id = JSON.stringify([group, subgroup]);
    let sum = sums.get(id);
    if (sum === undefined) {
      sum = {
        group,
        ...(subgroup === undefined ? {} : { subgroup }),
        requests: 0,
        answered: 0,
        inputTokens: 0,
        outputTokens: 0,
        costPicoUsd: 0n,
        cacheHits: 0,
        costSavedPicoUsd: 0n,
      };
      sums.set(id, sum);
    }
    const { requests, cacheHits, costSavedPicoUsd } = figuresOf(row);
    sum.requests += requests;
    if (row.status >= 200 && row.status <= 299) sum.answered += requests;
    sum.inputTokens += row.inputTokens;
    sum.outputTokens += row.outputTokens;
    sum.costPicoUsd += BigInt(row.costPicoUsd);
    sum.cacheHits += cacheHits;
    sum.costSavedPicoUsd += costSavedPicoUsd;
  }
  return [...sums.values()];
}

/**
 * UsageStore in process memory: for tests, examples and gateways that do not keep usage. It
 * keeps every record until the process ends, and rolls them up per hour and day as the Knex store
 * does, for its summaries.
 * @example usageRecorder({ store: new MemoryUsageStore() })
 */
export class MemoryUsageStore implements UsageStore {
  readonly #records: UsageRecord[] = [];
  readonly #hourly = new Map<string, Rollup>();
  readonly #daily = new Map<string, Rollup>();
  /** Each record's place in the order of insertion, as the Knex store's `seq`. */
  readonly #seq = new WeakMap<UsageRecord, number>();
  #inserted = 0;

  async insert(records: readonly UsageRecord[]): Promise<void> {
    // Whole milliseconds, as the Knex store keeps them.
    const whole = records.map((record) => ({ ...record, time: Math.floor(record.time) }));
    this.#records.push(...whole);
    for (const record of whole) this.#seq.set(record, this.#inserted++);
    for (const record of whole) {
      const { account, keyId, model, endpoint, status } = record;
      const hour = usageHour(record.time);
      addTo(this.#hourly, [hour, account, keyId, model, endpoint, status], record, hour);
      addTo(this.#daily, [usageDay(record.time), account, keyId, model, endpoint, status], record, hour);
    }
  }

  async list(filter: UsageFilter & { limit?: number } = {}): Promise<UsageRecord[]> {
    const { limit = 1000 } = filter;
    return this.#records
      .filter((record) => matches(record, filter))
      .reverse() // the sort is stable: ties stay newest first
      .sort((a, b) => b.time - a.time)
      .slice(0, limit)
      .map((record) => ({ ...record }));
  }

  async page(filter: UsageRecordFilter, page: { limit: number; cursor?: string }): Promise<UsagePage> {
    const [cursorTime, cursorSeq] = page.cursor === undefined ? [Infinity, Infinity] : (page.cursor.split('_').map(Number) as [number, number]);
    const matching = this.#records
      .map((record) => ({ record, seq: this.#seq.get(record) ?? 0 }))
      .filter(
        ({ record, seq }) =>
          matches(record, filter) &&
          (filter.model === undefined || record.model === filter.model) &&
          (filter.status === undefined || record.status === filter.status) &&
          (filter.until === undefined || record.time < filter.until) &&
          (record.time < cursorTime || (record.time === cursorTime && seq < cursorSeq)),
      )
      .sort((a, b) => b.record.time - a.record.time || b.seq - a.seq);
    const kept = matching.slice(0, page.limit);
    const last = kept.at(-1);
    return {
      records: kept.map(({ record }) => ({ ...record })),
      nextCursor: matching.length > page.limit && last !== undefined ? `${last.record.time}_${last.seq}` : null,
    };
  }

  async rollups(period: 'hour' | 'day', filter: UsageFilter & { until?: number }, page: { limit: number; after?: UsageRollupKey }): Promise<UsageRollup[]> {
    const unit = period === 'hour' ? HOUR_MS : DAY_MS;
    const since = filter.since === undefined ? -Infinity : Math.ceil(filter.since / unit) * unit;
    const until = filter.until === undefined ? Infinity : Math.ceil(filter.until / unit) * unit;
    const rows = [...(period === 'hour' ? this.#hourly : this.#daily).values()]
      .filter((rollup) => (filter.account === undefined || rollup.account === filter.account) && (filter.keyId === undefined || rollup.keyId === filter.keyId))
      .map(({ hour, day, ...rollup }) => ({ period: period === 'hour' ? hour : Date.parse(day), ...rollup }))
      .filter((row) => row.period >= since && row.period < until && (page.after === undefined || compareRollupKeys(row, page.after) > 0))
      .sort(compareRollupKeys);
    return rows.slice(0, page.limit);
  }

  async prune({ recordsBefore, rollupsBefore, limit = 1000 }: UsagePruning): Promise<number> {
    const firstDay = usageDay(rollupsBefore);
    let deleted = 0;
    // Oldest first and at most `limit` of each, as the Knex store deletes them.
    const byTime = this.#records.map((record, index) => ({ record, index })).filter(({ record }) => record.time < recordsBefore);
    const gone = new Set(
      byTime
        .sort((a, b) => a.record.time - b.record.time)
        .slice(0, limit)
        .map(({ index }) => index),
    );
    deleted += gone.size;
    const kept = this.#records.filter((_, index) => !gone.has(index));
    this.#records.splice(0, this.#records.length, ...kept);
    for (const rollups of [this.#hourly, this.#daily]) {
      const old = [...rollups].filter(([, rollup]) => rollup.day < firstDay).slice(0, limit);
      for (const [id] of old) rollups.delete(id);
      deleted += old.length;
    }
    return deleted;
  }

  async summarize(filter: UsageFilter, by: UsageGrouping, thenBy?: UsageGrouping): Promise<UsageRow[]> {
    const { raw, hourly, daily } = usageSpans(filter.since === undefined ? undefined : Math.ceil(filter.since));
    const narrowed = (row: { account: string; keyId: string }) =>
      (filter.account === undefined || row.account === filter.account) && (filter.keyId === undefined || row.keyId === filter.keyId);
    const parts = [
      summed(
        [...this.#daily.values()].filter((row) => narrowed(row) && (daily.sinceDay === undefined || row.day >= daily.sinceDay)),
        rollupFigures,
        by,
        thenBy,
      ),
    ];
    if (hourly !== undefined) {
      const hours = summed(
        [...this.#hourly.values()].filter((row) => narrowed(row) && row.hour >= hourly.since && row.hour < hourly.until),
        rollupFigures,
        by,
        thenBy,
      );
      parts.push(hourly.subtract ? negatedUsageRows(hours) : hours);
    }
    if (raw !== undefined) {
      parts.push(
        summed(
          this.#records.filter((record) => narrowed(record) && record.time >= raw.since && record.time < raw.until),
          recordFigures,
          by,
          thenBy,
        ),
      );
    }
    return mergeUsageRows(parts);
  }
}
