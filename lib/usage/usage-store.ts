import { utcDate } from '../quota/clock-windows.js';

/**
 * One model call, as it is metered: written once when the call ends (its answer sent or
 * refused), never changed.
 */
export interface UsageRecord {
  /** Unix ms at which the call was received; stores keep the whole millisecond (a fraction is dropped). */
  time: number;
  /** The request id the client got (`X-Request-Id` or `request-id`). */
  requestId: string;
  keyId: string;
  account: string;
  /** The endpoint's route, e.g. `/v1/chat/completions`, `/v1/messages`. */
  endpoint: string;
  /** The catalog id the client asked for; `null` when the request named none that could be read. */
  model: string | null;
  /** The id of the provider that answered (the last attempt's, when the call was routed over several); `null` when the model was not resolved. */
  provider: string | null;
  /** The model name that provider was sent; `null` (or left out) when the model was not resolved. */
  upstreamModel?: string | null;
  /** The W3C trace id of the request's span (`traceRequests()`), to find the call in the tracing backend; `null` (or left out) when it was not traced. */
  traceId?: string | null;
  /** Upstream attempts the call took (retries and fallbacks included); 0 (or left out) when none was made. */
  attempts?: number;
  /** The HTTP status of the answer (429 for a call the limits refused). */
  status: number;
  stream: boolean;
  /** Tokens from the upstream's own usage report; 0 when there was none. */
  inputTokens: number;
  outputTokens: number;
  /** How many stored files were attached. */
  attachments: number;
  /** From the request's arrival to the end of the answer, in ms. */
  latencyMs: number;
  /** From the upstream call to its first byte, in ms; `null` when no upstream call was made. */
  upstreamFirstByteMs: number | null;
  /** From the upstream call to the end of its answer, in ms; `null` when no upstream call was made. */
  upstreamMs: number | null;
  /**
   * What the call cost, in picodollars (10⁻¹² USD, an exact integer): its tokens at its model's
   * price (`callCost()`); 0 when the model has no known price or the call reached no upstream.
   */
  costPicoUsd: number;
  /** `hit` for a call answered from the response cache (its cost 0), `miss` for one it looked up and did not find (or whose store failed); absent (or null) when it was not looked up. */
  cache?: 'hit' | 'miss' | null;
  /** On a hit, what the stored answer cost when it was made, in picodollars: what the hit saved. 0 (or absent) otherwise. */
  costSavedPicoUsd?: number;
}

/** Which records a read covers. Every field narrows it; none is every record. */
export interface UsageFilter {
  account?: string;
  keyId?: string;
  /** Unix ms: records at or after it. */
  since?: number;
}

/** How summary rows are grouped: by UTC day (`2030-01-31`), by catalog model id, or by key id. */
export type UsageGrouping = 'day' | 'model' | 'key';

/** Totals of the records in one group. */
export interface UsageRow {
  /** The day, model id or key id of the group; `null` for records without a model. */
  group: string | null;
  /** Set when `summarize` was given `thenBy`: the group within `group`, e.g. the model of one day's calls. */
  subgroup?: string | null;
  requests: number;
  /** The records with a 2xx `status`: the calls answered (the others were refused or failed). */
  answered: number;
  inputTokens: number;
  outputTokens: number;
  /** The sum of the records' `costPicoUsd`: a bigint, exact however large. */
  costPicoUsd: bigint;
  /** The records answered from the response cache (`cache: 'hit'`). */
  cacheHits: number;
  /** The sum of the records' `costSavedPicoUsd`. */
  costSavedPicoUsd: bigint;
}

/** Which records a page of the request log covers: `UsageFilter`'s, narrowed further. */
export interface UsageRecordFilter extends UsageFilter {
  model?: string;
  /** The HTTP status of the answer. */
  status?: number;
  /** Unix ms: records before it. */
  until?: number;
}

/** A page of records, newest first; `nextCursor` (`null` on the last page) as `cursor` gives the next, older page. */
export interface UsagePage {
  records: UsageRecord[];
  nextCursor: string | null;
}

/** The shape of a `UsagePage`'s cursor: a record's time and its place in the store's order. */
export const USAGE_CURSOR = /^\d{1,15}_\d{1,15}$/;

/** The records of one hour or UTC day, account, key, model, endpoint and status, summed: a roll-up row. */
export interface UsageRollup {
  /** Unix ms of the start of the hour or UTC day. */
  period: number;
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
  /** What those answers cost when they were made (`costSavedPicoUsd`, summed). */
  costSavedPicoUsd: bigint;
}

/** Where `UsageStore.rollups` reads on from: the roll-up row last read. */
export type UsageRollupKey = Pick<UsageRollup, 'period' | 'account' | 'keyId' | 'model' | 'endpoint' | 'status'>;

/** What `UsageStore.prune` removes, each a Unix ms. */
export interface UsagePruning {
  /** The records from before it. */
  recordsBefore: number;
  /** The roll-ups of the UTC days before its day (hourly and daily): summaries since then are kept whole. */
  rollupsBefore: number;
  /** The most rows one call deletes from each table: a bound on the lock it takes. Default 1,000. */
  limit?: number;
  /** The time now: a store that keeps its records in periods (PostgreSQL's days) makes those ahead of it. */
  now?: number;
}

/**
 * Where usage records live. Implementations: `MemoryUsageStore`, `KnexUsageStore` (PostgreSQL,
 * SQLite). Written through `usageRecorder()`, which batches; read through `usageReport()`.
 */
export interface UsageStore {
  /** Stores every record, or (on an error) none. */
  insert(records: readonly UsageRecord[]): Promise<void>;
  /** Records matching `filter`, newest first (by `time`, then the last inserted), at most `limit` (default 1,000). */
  list(filter?: UsageFilter & { limit?: number }): Promise<UsageRecord[]>;
  /**
   * One row per group of the records matching `filter`, in no particular order; with `thenBy`
   * (another grouping than `by`), one row per group and subgroup that has records, each with
   * `subgroup` set: `summarize(filter, 'day', 'model')` gives each day's figures per model.
   * Stores read it from roll-ups kept as records are written (`usageSpans()`): its cost grows with
   * the groups and days it covers, not with the records.
   */
  summarize(filter: UsageFilter, by: UsageGrouping, thenBy?: UsageGrouping): Promise<UsageRow[]>;
  /**
   * Deletes at most `limit` of the records and of each roll-up's rows that `pruning` names, the
   * oldest first, and resolves to how many rows it deleted: call it again until 0 (`pruneUsage()`).
   * Summaries read the roll-ups, so records pruned still count in them; a summary since a time in
   * an hour whose records were pruned misses that hour's records after it.
   */
  prune?(pruning: UsagePruning): Promise<number>;
  /**
   * The records matching `filter`, newest first (by `time`, then the last inserted), at most
   * `limit`, after the record of `cursor` (a `nextCursor` of this store); by keyset, as fast on the
   * last page as on the first.
   */
  page?(filter: UsageRecordFilter, page: { limit: number; cursor?: string }): Promise<UsagePage>;
  /**
   * At most `limit` of the hourly or daily roll-up rows of `filter`'s account and key whose period
   * starts in [`since`, `until`), oldest first, then by account, key, model, endpoint and status,
   * after the row `after` (the last of the previous call): what an export of the roll-ups reads.
   */
  rollups?(period: 'hour' | 'day', filter: UsageFilter & { until?: number }, page: { limit: number; after?: UsageRollupKey }): Promise<UsageRollup[]>;
}

/** The UTC day of a record, as `summarize(…, 'day')` groups it. */
export function usageDay(time: number): string {
  return utcDate(time);
}
