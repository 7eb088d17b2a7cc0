import type { Knex } from 'knex';
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
import { DAY_MS, HOUR_MS, mergeUsageRows, negatedUsageRows, usageSpans } from '../../usage/usage-rollups.js';
import { reportRows, SqliteWriterGoneError, type PreparedWrites, type ReportReads } from './sqlite-writer.js';
import { storeTimeoutMs, withinTimeout, type KnexStoreOptions } from './store-options.js';
import { addUsagePartitions, dropUsagePartitions } from './usage-partitions.js';
import { wholeLowerBound, wholeMs } from './whole-times.js';

const TABLE = 'kmg_usage';

interface UsageRowDb {
  time: number | string;
  day: string;
  request_id: string;
  key_id: string;
  account: string;
  endpoint: string;
  model: string | null;
  provider: string | null;
  upstream_model: string | null;
  attempts: number;
  status: number;
  stream: boolean | number;
  input_tokens: number | string;
  output_tokens: number | string;
  attachments: number;
  latency_ms: number;
  upstream_first_byte_ms: number | null;
  upstream_ms: number | null;
  cost_picousd: number | string;
  trace_id: string | null;
  cache: string | null;
  cost_saved_picousd: number | string;
}

// The columns an insert writes.
const COLUMNS = [
  'time',
  'day',
  'request_id',
  'key_id',
  'account',
  'endpoint',
  'model',
  'provider',
  'upstream_model',
  'attempts',
  'status',
  'stream',
  'input_tokens',
  'output_tokens',
  'attachments',
  'latency_ms',
  'upstream_first_byte_ms',
  'upstream_ms',
  'cost_picousd',
  'trace_id',
  'cache',
  'cost_saved_picousd',
] as const satisfies ReadonlyArray<keyof UsageRowDb>;

const COLUMN_LIST = COLUMNS.map((column) => `"${column}"`).join(', ');

/**
 * One INSERT for a whole batch through Knex, its rows bound as one JSON array that the database
 * takes apart (PostgreSQL's json_populate_recordset by the table's own column types, SQLite's
 * jsonb_each): through Knex, a bound value per field cost the client more than the database's own
 * work (measured with bench:proxy; the run is in the git history of BENCHMARKS.md).
 * jsonb_each (SQLite 3.45 and later, which every better-sqlite3 12 bundles) hands each row over
 * parsed once, where json_each's text made every json_extract parse the row again. Rows are
 * numbered (`seq`) in the array's order.
 */
const INSERT_SQL: Record<string, string> = {
  postgresql: `insert into ${TABLE} (${COLUMN_LIST}) select ${COLUMN_LIST} from json_populate_recordset(null::${TABLE}, ?)`,
  sqlite3: `insert into ${TABLE} (${COLUMN_LIST}) select ${COLUMNS.map((column) => `json_extract(value, '$.${column}')`).join(', ')} from jsonb_each(?)`,
};

/**
 * SQLite's writer thread takes each value bound on its own, which costs both threads less than a
 * JSON array taken apart by jsonb_each (docs/DECISIONS.md, Performance): a batch of up to this many rows (the
 * recorder's default batch) is one INSERT of its rows' values in `COLUMNS`' order; a larger one is
 * one JSON insert, so that a batch is always one statement.
 */
const ROWS_PER_VALUES_INSERT = 100;
const ROW_PLACEHOLDERS = `(${COLUMNS.map(() => '?').join(', ')})`;

/** The rows' values in `COLUMNS`' order, one after the other; a boolean as SQLite keeps it (0 or 1). */
function rowValues(rows: readonly UsageRowDb[]): unknown[] {
  const values: unknown[] = [];
  for (const row of rows) {
    for (const column of COLUMNS) {
      const value = row[column];
      values.push(typeof value === 'boolean' ? Number(value) : value);
    }
  }
  return values;
}

const HOURLY = 'kmg_usage_hourly';
const DAILY = 'kmg_usage_daily';
const HOURLY_BY_MODEL = 'kmg_usage_hourly_by_model';
const DAILY_BY_MODEL = 'kmg_usage_daily_by_model';
const DAILY_BY_ACCOUNT = 'kmg_usage_daily_by_account';
const DAILY_BY_KEY = 'kmg_usage_daily_by_key';

/** How a summary sums the rows of one table: the raw records, or a roll-up of them. */
interface SumSource {
  requests: string;
  /** The requests answered from the response cache. */
  cacheHits: string;
  /** The requests with a 2xx status. */
  answered: string;
  group: Record<UsageGrouping, string>;
}

const ROLLUP: SumSource = {
  requests: 'sum(requests)',
  cacheHits: 'sum(cache_hits)',
  answered: 'sum(case when status between 200 and 299 then requests else 0 end)',
  // A roll-up keeps the calls without a model as '' (a key column cannot be null).
  group: { day: 'day', model: "nullif(model, '')", key: 'key_id' },
};

// The coarser roll-ups (by model, by account and model, by key), their 2xx calls counted as they are
// written. Each lacks a column: `summarize` reads one only for a summary that neither groups nor
// narrows by it.
const BY_MODEL: SumSource = {
  requests: 'sum(requests)',
  cacheHits: 'sum(cache_hits)',
  answered: 'sum(answered)',
  group: { day: 'day', model: "nullif(model, '')", key: 'key_id' },
};
const BY_KEY: SumSource = { ...BY_MODEL, group: { day: 'day', model: 'model', key: 'key_id' } };

/** A roll-up a summary may read: its table and how it is summed. */
interface Rollup {
  table: string;
  source: SumSource;
}

/**
 * The roll-ups of each period a summary may read: the coarser ones, the fewest rows first, with the
 * columns each keeps beside its period, and the full one. The first coarser one that keeps every
 * column a summary narrows or groups by serves its span of that period; the full one any other.
 */
const ROLLUPS: Record<'hourly' | 'daily', { coarser: Array<Rollup & { columns: readonly string[] }>; full: Rollup }> = {
  hourly: { coarser: [{ table: HOURLY_BY_MODEL, columns: ['model'], source: BY_MODEL }], full: { table: HOURLY, source: ROLLUP } },
  daily: {
    coarser: [
      { table: DAILY_BY_MODEL, columns: ['model'], source: BY_MODEL },
      { table: DAILY_BY_ACCOUNT, columns: ['account', 'model'], source: BY_MODEL },
      { table: DAILY_BY_KEY, columns: ['account', 'key_id'], source: BY_KEY },
    ],
    full: { table: DAILY, source: ROLLUP },
  },
};

const servingRollup = (period: 'hourly' | 'daily', needed: readonly string[]): Rollup =>
  ROLLUPS[period].coarser.find((rollup) => needed.every((column) => rollup.columns.includes(column))) ?? ROLLUPS[period].full;

const RAW: SumSource = {
  requests: 'count(*)',
  cacheHits: "sum(case when cache = 'hit' then 1 else 0 end)",
  answered: 'sum(case when status between 200 and 299 then 1 else 0 end)',
  group: { day: 'day', model: 'model', key: 'key_id' },
};

interface SummedRow {
  group: string | null;
  subgroup: string | null;
  requests: number | string;
  answered: number | string;
  input_tokens: number | string;
  output_tokens: number | string;
  cost_picousd: string;
  cache_hits: number | string;
  cost_saved_picousd: string;
}

function toRow(record: UsageRecord): UsageRowDb {
  const time = wholeMs(record.time);
  return {
    time,
    day: usageDay(time),
    request_id: record.requestId,
    key_id: record.keyId,
    account: record.account,
    endpoint: record.endpoint,
    model: record.model,
    provider: record.provider,
    upstream_model: record.upstreamModel ?? null,
    attempts: record.attempts ?? 0,
    status: record.status,
    stream: record.stream,
    input_tokens: record.inputTokens,
    output_tokens: record.outputTokens,
    attachments: record.attachments,
    latency_ms: record.latencyMs,
    upstream_first_byte_ms: record.upstreamFirstByteMs,
    upstream_ms: record.upstreamMs,
    cost_picousd: record.costPicoUsd,
    trace_id: record.traceId ?? null,
    cache: record.cache ?? null,
    cost_saved_picousd: record.costSavedPicoUsd ?? 0,
  };
}

// pg returns bigint columns and sums as strings, SQLite booleans as 0 and 1.
function toRecord(row: UsageRowDb): UsageRecord {
  return {
    time: Number(row.time),
    requestId: row.request_id,
    keyId: row.key_id,
    account: row.account,
    endpoint: row.endpoint,
    model: row.model,
    provider: row.provider,
    // Left out as a record without them was written: the fields are optional.
    ...(row.upstream_model !== null && { upstreamModel: row.upstream_model }),
    ...(row.attempts > 0 && { attempts: row.attempts }),
    ...(row.trace_id !== null && { traceId: row.trace_id }),
    status: row.status,
    stream: Boolean(row.stream),
    inputTokens: Number(row.input_tokens),
    outputTokens: Number(row.output_tokens),
    attachments: row.attachments,
    latencyMs: row.latency_ms,
    upstreamFirstByteMs: row.upstream_first_byte_ms,
    upstreamMs: row.upstream_ms,
    costPicoUsd: Number(row.cost_picousd),
    ...(row.cache !== null && { cache: row.cache as 'hit' | 'miss' }),
    ...(Number(row.cost_saved_picousd) > 0 && { costSavedPicoUsd: Number(row.cost_saved_picousd) }),
  };
}

/**
 * UsageStore on Knex (PostgreSQL or SQLite), in the table `kmg_usage`. Run `migrate(knex)` first.
 * Each record's UTC day is stored beside its time, so grouping by day is the same plain GROUP BY
 * on both databases. Reads (`list`, `summarize`, which answer admin requests) fail within
 * `timeoutMs` (options: `KnexStoreOptions`; `preparedReads` is not used). `insert` is left to the
 * driver's own limits: given up on while it could still commit, its batch would be written twice
 * when the recorder tries it again. On SQLite, better-sqlite3 runs an insert through Knex on the
 * event loop, which no other request uses meanwhile: give the store a `sqliteWriter` as
 * `preparedWrites`, which runs it on a thread of its own, or the recorder a small `maxBatch`.
 * The migrations' trigger adds each insert to the roll-ups `kmg_usage_hourly` and
 * `kmg_usage_daily`, to `kmg_usage_hourly_by_model` and `kmg_usage_daily_by_model` (every
 * account's calls by model), `kmg_usage_daily_by_account` and `kmg_usage_daily_by_key`, in its transaction; `summarize`
 * reads them (`usageSpans()`), on SQLite through a `sqliteReader` given as `reportReads`, off the
 * event loop.
 * @example usageRecorder({ store: new KnexUsageStore(knex) })
 */
export class KnexUsageStore implements UsageStore {
  readonly #knex: Knex;
  readonly #timeoutMs: number;
  readonly #insertSql: string;
  readonly #preparedInsert: ((bindings: readonly unknown[]) => Promise<void>) | undefined;
  /** SQLite's writer thread, which takes a batch's values bound one by one. */
  readonly #sqliteWrites: PreparedWrites | undefined;
  /** Its INSERT of each number of rows, prepared once each. */
  readonly #valuesInserts: Array<(bindings: readonly unknown[]) => Promise<void>> = [];
  readonly #reportReads: ReportReads | undefined;

  constructor(knex: Knex, options: KnexStoreOptions = {}) {
    const insertSql = INSERT_SQL[knex.client.dialect as string];
    if (insertSql === undefined) throw new TypeError('koa-model-gateway: KnexUsageStore runs on PostgreSQL and SQLite');
    this.#knex = knex;
    this.#timeoutMs = storeTimeoutMs(options);
    this.#insertSql = insertSql;
    this.#preparedInsert = options.preparedWrites?.prepare(insertSql);
    this.#sqliteWrites = knex.client.dialect === 'postgresql' ? undefined : options.preparedWrites;
    this.#reportReads = options.reportReads;
  }

  /** All the records or none: one statement. */
  async insert(records: readonly UsageRecord[]): Promise<void> {
    if (records.length === 0) return;
    const rows = records.map(toRow);
    if (this.#preparedInsert !== undefined) {
      try {
        return await (this.#sqliteWrites !== undefined && rows.length <= ROWS_PER_VALUES_INSERT
          ? this.#valuesInsert(this.#sqliteWrites, rows.length)(rowValues(rows))
          : this.#preparedInsert([JSON.stringify(rows)]));
      } catch (err) {
        // The writer never ran it: Knex's connection will.
        if (!(err instanceof SqliteWriterGoneError)) throw err;
      }
    }
    // Through Knex, one JSON array: Knex's handling of each bound value would cost more.
    await this.#knex.raw(this.#insertSql, [JSON.stringify(rows)]);
  }

  /** The writer's INSERT of `rows` rows, each value bound on its own. */
  #valuesInsert(writes: PreparedWrites, rows: number): (bindings: readonly unknown[]) => Promise<void> {
    return (this.#valuesInserts[rows] ??= writes.prepare(`insert into ${TABLE} (${COLUMN_LIST}) values ${Array(rows).fill(ROW_PLACEHOLDERS).join(', ')}`));
  }

  async list(filter: UsageFilter & { limit?: number } = {}): Promise<UsageRecord[]> {
    const { limit = 1000 } = filter;
    const rows = await withinTimeout(this.#timeoutMs, async () =>
      this.#where(filter)
        .orderBy([
          { column: 'time', order: 'desc' },
          { column: 'seq', order: 'desc' },
        ])
        .limit(limit),
    );
    return (rows as UsageRowDb[]).map(toRecord);
  }

  /**
   * The `(time, seq)` keyset, newest first, read in the order of the index its filters lead (the
   * migrations' request-log indexes): (time) alone, (account, time), (key_id, time),
   * (account, status, time) and (status, time). A model, or a status beside a key, is checked on
   * the records of the index that the rest selects.
   */
  async page(filter: UsageRecordFilter, page: { limit: number; cursor?: string }): Promise<UsagePage> {
    const query = this.#where(filter);
    if (filter.model !== undefined) query.where('model', filter.model);
    if (filter.status !== undefined) query.where('status', filter.status);
    if (filter.until !== undefined) query.where('time', '<', wholeLowerBound(filter.until));
    if (page.cursor !== undefined) {
      const [time, seq] = page.cursor.split('_').map(Number) as [number, number];
      // `time <= ?` bounds the index's range: the page after the hundredth starts where it ends, not at the newest record.
      query.where('time', '<=', time).where((older) => older.where('time', '<', time).orWhere('seq', '<', seq));
    }
    const rows = (await withinTimeout(this.#timeoutMs, async () =>
      query
        .orderBy([
          { column: 'time', order: 'desc' },
          { column: 'seq', order: 'desc' },
        ])
        .limit(page.limit + 1),
    )) as Array<UsageRowDb & { seq: number | string }>;
    const kept = rows.slice(0, page.limit);
    const last = kept.at(-1);
    return { records: kept.map(toRecord), nextCursor: rows.length > page.limit && last !== undefined ? `${Number(last.time)}_${Number(last.seq)}` : null };
  }

  /** A range of the roll-up's primary key: (period, account, key_id, model, endpoint, status). */
  async rollups(period: 'hour' | 'day', filter: UsageFilter & { until?: number }, page: { limit: number; after?: UsageRollupKey }): Promise<UsageRollup[]> {
    const hourly = period === 'hour';
    const column = hourly ? 'hour' : 'day';
    // The period as the table keeps it: Unix ms of the hour, or the UTC date.
    const stored = (ms: number) => (hourly ? ms : usageDay(ms));
    const unit = hourly ? HOUR_MS : DAY_MS;
    const query = this.#narrowed(hourly ? HOURLY : DAILY, filter).select('*');
    if (filter.since !== undefined) query.where(column, '>=', stored(Math.ceil(filter.since / unit) * unit));
    if (filter.until !== undefined) query.where(column, '<', stored(Math.ceil(filter.until / unit) * unit));
    const { after } = page;
    if (after !== undefined) {
      query.whereRaw(`(${column}, account, key_id, model, endpoint, status) > (?, ?, ?, ?, ?, ?)`, [
        stored(after.period),
        after.account,
        after.keyId,
        after.model ?? '',
        after.endpoint,
        after.status,
      ]);
    }
    const rows = (await withinTimeout(this.#timeoutMs, async () =>
      query.orderBy([column, 'account', 'key_id', 'model', 'endpoint', 'status']).limit(page.limit),
    )) as Array<{
      hour?: number | string;
      day: string;
      account: string;
      key_id: string;
      model: string;
      endpoint: string;
      status: number;
      requests: number | string;
      input_tokens: number | string;
      output_tokens: number | string;
      cost_picousd: number | string;
      cache_hits: number | string;
      cost_saved_picousd: number | string;
    }>;
    return rows.map((row) => ({
      period: hourly ? Number(row.hour) : Date.parse(row.day),
      account: row.account,
      keyId: row.key_id,
      model: row.model === '' ? null : row.model,
      endpoint: row.endpoint,
      status: row.status,
      requests: Number(row.requests),
      inputTokens: Number(row.input_tokens),
      outputTokens: Number(row.output_tokens),
      costPicoUsd: BigInt(row.cost_picousd),
      cacheHits: Number(row.cache_hits),
      costSavedPicoUsd: BigInt(row.cost_saved_picousd),
    }));
  }

  /**
   * One statement per table, each deleting at most `limit` rows, the oldest by its index (the
   * records' time, a roll-up's period): no lock longer than one such batch. On PostgreSQL, first
   * the records' day partitions that `recordsBefore` has passed are dropped whole (counted by
   * PostgreSQL's estimate of their rows), and the partitions of the days ahead of `now` made
   * (usage-partitions.ts): the batches delete only what is left, in the default partition and the
   * day `recordsBefore` falls in.
   */
  async prune({ recordsBefore, rollupsBefore, limit = 1000, now }: UsagePruning): Promise<number> {
    const firstDay = usageDay(rollupsBefore);
    const postgres = this.#knex.client.dialect === 'postgresql';
    let deleted = 0;
    if (postgres) {
      deleted += await withinTimeout(this.#timeoutMs, async () => dropUsagePartitions(this.#knex, wholeLowerBound(recordsBefore)));
      if (now !== undefined) await withinTimeout(this.#timeoutMs, async () => addUsagePartitions(this.#knex, now));
    }
    // A roll-up has no id column: PostgreSQL's row address (ctid), SQLite's rowid. The records'
    // partitions each have addresses of their own: their key, (time, seq).
    const oldest = (table: string, where: string) => {
      if (!postgres) return `delete from ${table} where rowid in (select rowid from ${table} where ${where} limit ?)`;
      if (table === TABLE) return `delete from ${table} where (time, seq) in (select time, seq from ${table} where ${where} limit ?)`;
      return `delete from ${table} where ctid = any(array(select ctid from ${table} where ${where} limit ?))`;
    };
    for (const [sql, before] of [
      [oldest(TABLE, 'time < ? order by time'), wholeLowerBound(recordsBefore)],
      [oldest(HOURLY, 'hour < ? order by hour'), Date.parse(firstDay)],
      [oldest(DAILY, 'day < ? order by day'), firstDay],
      [oldest(HOURLY_BY_MODEL, 'hour < ? order by hour'), Date.parse(firstDay)],
      [oldest(DAILY_BY_MODEL, 'day < ? order by day'), firstDay],
      [oldest(DAILY_BY_ACCOUNT, 'day < ? order by day'), firstDay],
      [oldest(DAILY_BY_KEY, 'day < ? order by day'), firstDay],
    ] as const) {
      const result = (await withinTimeout(this.#timeoutMs, async () => this.#knex.raw(sql, [before, limit]))) as
        | { rowCount?: number; changes?: number }
        | undefined;
      deleted += Number(result?.rowCount ?? result?.changes ?? 0);
    }
    return deleted;
  }

  /**
   * Reads the roll-ups (and, for a `since` within an hour, that hour's records): see `usageSpans()`.
   * Each span reads the roll-up with the fewest rows that holds the columns the summary needs
   * (`ROLLUPS`): every account's figures by day or model the roll-ups by model, a few rows a
   * period; an account's by day or model the daily roll-up by account and model; a key's, or any
   * by key alone, the daily roll-up by key; any other the full roll-ups, by their account or key
   * index when it narrows.
   */
  async summarize(filter: UsageFilter, by: UsageGrouping, thenBy?: UsageGrouping): Promise<UsageRow[]> {
    const spans = usageSpans(filter.since === undefined ? undefined : wholeLowerBound(filter.since));
    const groupings = [by, thenBy];
    const needed = [
      ...(filter.account === undefined ? [] : ['account']),
      ...(filter.keyId !== undefined || groupings.includes('key') ? ['key_id'] : []),
      ...(groupings.includes('model') ? ['model'] : []),
    ];
    const [hourly, daily] = [servingRollup('hourly', needed), servingRollup('daily', needed)];
    const parts = await withinTimeout(this.#timeoutMs, async () =>
      Promise.all(
        [
          spans.raw && this.#sum(RAW, this.#narrowed(TABLE, filter).where('time', '>=', spans.raw.since).where('time', '<', spans.raw.until), by, thenBy),
          spans.hourly &&
            this.#sum(
              hourly.source,
              this.#narrowed(hourly.table, filter).where('hour', '>=', spans.hourly.since).where('hour', '<', spans.hourly.until),
              by,
              thenBy,
            ).then((rows) => (spans.hourly?.subtract ? negatedUsageRows(rows) : rows)),
          this.#sum(
            daily.source,
            spans.daily.sinceDay === undefined
              ? this.#narrowed(daily.table, filter)
              : this.#narrowed(daily.table, filter).where('day', '>=', spans.daily.sinceDay),
            by,
            thenBy,
          ),
        ].filter((part) => part !== undefined),
      ),
    );
    return mergeUsageRows(parts);
  }

  async #sum(source: SumSource, query: Knex.QueryBuilder, by: UsageGrouping, thenBy: UsageGrouping | undefined): Promise<UsageRow[]> {
    const group = source.group[by];
    const subgroup = thenBy === undefined ? undefined : source.group[thenBy];
    query
      .select(this.#knex.raw(`${group} as "group"`))
      .select(this.#knex.raw(subgroup === undefined ? 'null as subgroup' : `${subgroup} as subgroup`))
      .select(this.#knex.raw(`${source.requests} as requests`))
      .select(this.#knex.raw(`${source.answered} as answered`))
      .sum({ input_tokens: 'input_tokens', output_tokens: 'output_tokens' })
      // As text: both drivers give a large integer as a number that has lost its last digits.
      .select(this.#knex.raw('cast(sum(cost_picousd) as text) as cost_picousd'))
      .select(this.#knex.raw(`${source.cacheHits} as cache_hits`))
      .select(this.#knex.raw('cast(sum(cost_saved_picousd) as text) as cost_saved_picousd'))
      .groupBy(subgroup === undefined ? [this.#knex.raw(group)] : [this.#knex.raw(group), this.#knex.raw(subgroup)]);
    const rows = (await reportRows(query, this.#reportReads)) as SummedRow[];
    return rows.map((row) => ({
      group: row.group,
      ...(thenBy === undefined ? {} : { subgroup: row.subgroup ?? null }),
      requests: Number(row.requests),
      answered: Number(row.answered),
      inputTokens: Number(row.input_tokens),
      outputTokens: Number(row.output_tokens),
      costPicoUsd: BigInt(row.cost_picousd),
      cacheHits: Number(row.cache_hits),
      costSavedPicoUsd: BigInt(row.cost_saved_picousd),
    }));
  }

  /** The rows of `table` that `filter`'s account and key select. */
  #narrowed(table: string, filter: UsageFilter): Knex.QueryBuilder {
    const query = this.#knex(table);
    if (filter.account !== undefined) query.where('account', filter.account);
    if (filter.keyId !== undefined) query.where('key_id', filter.keyId);
    return query;
  }

  #where(filter: UsageFilter): Knex.QueryBuilder {
    const query = this.#narrowed(TABLE, filter).select('*');
    if (filter.since !== undefined) query.where('time', '>=', wholeLowerBound(filter.since));
    return query;
  }
}
