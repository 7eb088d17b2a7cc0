import type { Knex } from 'knex';
import { StoreUnavailableError } from '../../errors/gateway-error.js';
import type { FileRecord, FileStore, ListQuery, StockLimits, FileUsage } from '../../files/file-store.js';
import { firstRowReader } from './prepared-reads.js';
import { reportRows, type ReportReads } from './sqlite-writer.js';
import { storeTimeoutMs, transactionWithinTimeout, withinTimeout, type KnexStoreOptions } from './store-options.js';

const FILES = 'kmg_files';
const ACCOUNTS = 'kmg_file_accounts';
const COLUMNS = ['id', 'account', 'filename', 'bytes', 'created_at', 'expires_at'];
// Well under the bind-parameter limits of PostgreSQL (65,535) and SQLite (32,766).
const IDS_PER_QUERY = 1000;

function* chunks(ids: readonly string[]): Generator<readonly string[]> {
  for (let start = 0; start < ids.length; start += IDS_PER_QUERY) yield ids.slice(start, start + IDS_PER_QUERY);
}

interface FileRow {
  id: string;
  account: string;
  filename: string;
  bytes: number | string;
  created_at: number | string;
  expires_at: number | string | null;
}

// pg returns bigint columns, counts and sums as strings.
function toRecord(row: FileRow): FileRecord {
  return {
    id: row.id,
    account: row.account,
    filename: row.filename,
    bytes: Number(row.bytes),
    createdAt: Number(row.created_at),
    expiresAt: row.expires_at === null ? null : Number(row.expires_at),
  };
}

function toRow(file: FileRecord): FileRow {
  return {
    id: file.id,
    account: file.account,
    filename: file.filename,
    bytes: file.bytes,
    created_at: file.createdAt,
    expires_at: file.expiresAt,
  };
}

/**
 * Expiry times are whole seconds, so flooring a fractional `now` (a `Date.now() / 1000` clock)
 * changes no answer, and PostgreSQL's bigint column refuses fractions.
 */
const seconds = Math.floor;

/** Restricts a query to files that have not expired at `now` (whole seconds). */
const live = (now: number) => (query: Knex.QueryBuilder) => query.whereNull('expires_at').orWhere('expires_at', '>', now);

/** The count and bytes of an account's live files: one row. */
function usageQuery(knex: Knex | Knex.Transaction, account: string, now: number): Knex.QueryBuilder {
  return knex(FILES)
    .where({ account })
    .where(live(seconds(now)))
    .select(knex.raw('count(*) as files'), knex.raw('coalesce(sum(bytes), 0) as bytes'));
}

function toUsage([row]: unknown[]): FileUsage {
  const sums = row as { files: number | string; bytes: number | string } | undefined;
  return { files: Number(sums?.files ?? 0), bytes: Number(sums?.bytes ?? 0) };
}

/**
 * FileStore on Knex (PostgreSQL or SQLite). Run `migrate(knex)` first. Creations of one account
 * run one at a time, across every process sharing the database, so the stock limits hold exactly.
 * Every call fails within `timeoutMs` (options: `KnexStoreOptions`). On SQLite use one Knex
 * instance per process (its default pool of one connection): the driver waits for locks
 * synchronously.
 * @example
 * const files = new KnexFileStore(knex);
 * const created = await files.create(record, { maxFiles: 1000, maxBytes: 100_000_000 }, now);
 */
export class KnexFileStore implements FileStore {
  readonly #knex: Knex;
  readonly #timeoutMs: number;
  // Every retrieve and download reads one file: a prepared statement where `preparedReads` is given.
  readonly #byId: (account: string, id: string, now: number) => FileRow | undefined | Promise<FileRow | undefined>;
  readonly #reportReads: ReportReads | undefined;

  constructor(knex: Knex, options: KnexStoreOptions = {}) {
    this.#knex = knex;
    this.#timeoutMs = storeTimeoutMs(options);
    this.#reportReads = options.reportReads;
    this.#byId = firstRowReader(options.preparedReads, (account: string, id: string, now: number) =>
      knex<FileRow>(FILES).where({ account, id }).where(live(now)).select(COLUMNS),
    );
  }

  async create(file: FileRecord, limits: StockLimits, now: number): Promise<boolean> {
    return transactionWithinTimeout(this.#knex, this.#timeoutMs, async (trx, expired) => {
      // The first statement writes: SQLite takes its write lock right here (a deferred transaction
      // that read first could not upgrade under contention), and PostgreSQL locks the account's
      // row until commit. Either way the sums below cannot change until this transaction ends.
      await trx(ACCOUNTS).insert({ account: file.account }).onConflict('account').merge();
      const usage = toUsage(await usageQuery(trx, file.account, now));
      if (usage.files + 1 > limits.maxFiles || usage.bytes + file.bytes > limits.maxBytes) return false;
      await trx(FILES).insert(toRow(file));
      // Its caller was told that the creation failed: roll back rather than commit.
      if (expired()) throw new StoreUnavailableError('the creation outlasted its timeout');
      return true;
    });
  }

  async get(account: string, id: string, now: number): Promise<FileRecord | undefined> {
    const row = await withinTimeout(this.#timeoutMs, () => this.#byId(account, id, seconds(now)));
    return row && toRecord(row);
  }

  async list(account: string, query: ListQuery, now: number): Promise<{ files: FileRecord[]; hasMore: boolean }> {
    const select = this.#knex<FileRow>(FILES)
      .where({ account })
      .where(live(seconds(now)))
      .orderBy('id', query.order)
      .limit(query.limit + 1); // one more than asked says whether more follow
    if (query.after !== undefined) select.where('id', query.order === 'asc' ? '>' : '<', query.after);
    const rows: FileRow[] = await withinTimeout(this.#timeoutMs, async () => select);
    return { files: rows.slice(0, query.limit).map(toRecord), hasMore: rows.length > query.limit };
  }

  async delete(account: string, id: string, now: number): Promise<boolean> {
    const deleted = await withinTimeout(this.#timeoutMs, async () =>
      this.#knex<FileRow>(FILES)
        .where({ account, id })
        .where(live(seconds(now)))
        .del(),
    );
    return deleted > 0;
  }

  async usage(account: string, now: number): Promise<FileUsage> {
    return withinTimeout(this.#timeoutMs, async () => toUsage(await reportRows(usageQuery(this.#knex, account, now), this.#reportReads)));
  }

  async removeExpired(now: number, max: number): Promise<FileRecord[]> {
    // Knex cannot read DELETE ... RETURNING on SQLite: select, then delete what was selected. Two
    // sweeps at the same moment may both return a record; deleting its blob twice is harmless.
    return withinTimeout(this.#timeoutMs, async () => {
      const rows: FileRow[] = await this.#knex<FileRow>(FILES).where('expires_at', '<=', seconds(now)).limit(max);
      await this.#deleteIds(rows.map((row) => row.id));
      return rows.map(toRecord);
    });
  }

  async existing(ids: readonly string[]): Promise<Set<string>> {
    return withinTimeout(this.#timeoutMs, async () => {
      const found = new Set<string>();
      for (const chunk of chunks(ids)) {
        const rows: Pick<FileRow, 'id'>[] = await this.#knex<FileRow>(FILES).select('id').whereIn('id', chunk);
        for (const row of rows) found.add(row.id);
      }
      return found;
    });
  }

  async #deleteIds(ids: readonly string[]): Promise<void> {
    for (const chunk of chunks(ids)) await this.#knex<FileRow>(FILES).whereIn('id', chunk).del();
  }
}
