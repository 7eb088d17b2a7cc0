import type { Knex } from 'knex';
import type { FileRecord, FileStore, ListQuery, StockLimits, Usage } from '../../files/file-store.js';
import { preparedRead } from './prepared-read.js';

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
 * Restricts a query to files that have not expired at `now`. Expiry times are whole seconds, so
 * flooring a fractional `now` (a `Date.now() / 1000` clock) changes no answer, and PostgreSQL's
 * bigint column refuses fractions.
 */
const live = (now: number) => (query: Knex.QueryBuilder) =>
  query.whereNull('expires_at').orWhere('expires_at', '>', Math.floor(now));

async function usageOf(knex: Knex | Knex.Transaction, account: string, now: number): Promise<Usage> {
  const row = (await knex(FILES)
    .where({ account })
    .where(live(now))
    .first(knex.raw('count(*) as files'), knex.raw('coalesce(sum(bytes), 0) as bytes'))) as
    | { files: number | string; bytes: number | string }
    | undefined;
  return { files: Number(row?.files ?? 0), bytes: Number(row?.bytes ?? 0) };
}

/**
 * FileStore on Knex (PostgreSQL or SQLite). Run `migrate(knex)` first. Creations of one account
 * run one at a time, across every process sharing the database, so the stock limits hold exactly.
 * On SQLite use one Knex instance per process (its default pool of one connection): the driver
 * waits for locks synchronously.
 * @example
 * const files = new KnexFileStore(knex);
 * const created = await files.create(record, { maxFiles: 1000, maxBytes: 100_000_000 }, now);
 */
export class KnexFileStore implements FileStore {
  readonly #knex: Knex;
  // Every retrieve and download reads one file: prepared once per connection (see prepared-read.ts).
  readonly #byId: (account: string, id: string, now: number) => Promise<FileRow | undefined>;

  constructor(knex: Knex) {
    this.#knex = knex;
    this.#byId = preparedRead(
      knex,
      'kmg_file_by_id',
      `select ${COLUMNS.join(', ')} from ${FILES} where account = ? and id = ? and (expires_at is null or expires_at > ?)`,
      (account: string, id: string, now: number) => knex<FileRow>(FILES).where({ account, id }).where(live(now)).first(COLUMNS),
    );
  }

  async create(file: FileRecord, limits: StockLimits, now: number): Promise<boolean> {
    return this.#knex.transaction(async (trx) => {
      // The first statement writes: SQLite takes its write lock right here (a deferred transaction
      // that read first could not upgrade under contention), and PostgreSQL locks the account's
      // row until commit. Either way the sums below cannot change until this transaction ends.
      await trx(ACCOUNTS).insert({ account: file.account }).onConflict('account').merge();
      const usage = await usageOf(trx, file.account, now);
      if (usage.files + 1 > limits.maxFiles || usage.bytes + file.bytes > limits.maxBytes) return false;
      await trx(FILES).insert(toRow(file));
      return true;
    });
  }

  async get(account: string, id: string, now: number): Promise<FileRecord | undefined> {
    const row = await this.#byId(account, id, Math.floor(now));
    return row && toRecord(row);
  }

  async list(account: string, query: ListQuery, now: number): Promise<{ files: FileRecord[]; hasMore: boolean }> {
    const select = this.#knex<FileRow>(FILES)
      .where({ account })
      .where(live(now))
      .orderBy('id', query.order)
      .limit(query.limit + 1); // one more than asked says whether more follow
    if (query.after !== undefined) select.where('id', query.order === 'asc' ? '>' : '<', query.after);
    const rows: FileRow[] = await select;
    return { files: rows.slice(0, query.limit).map(toRecord), hasMore: rows.length > query.limit };
  }

  async delete(account: string, id: string, now: number): Promise<boolean> {
    const deleted = await this.#knex<FileRow>(FILES).where({ account, id }).where(live(now)).del();
    return deleted > 0;
  }

  async usage(account: string, now: number): Promise<Usage> {
    return usageOf(this.#knex, account, now);
  }

  async removeExpired(now: number, max: number): Promise<FileRecord[]> {
    // Knex cannot read DELETE ... RETURNING on SQLite: select, then delete what was selected. Two
    // sweeps at the same moment may both return a record; deleting its blob twice is harmless.
    const rows: FileRow[] = await this.#knex<FileRow>(FILES).where('expires_at', '<=', Math.floor(now)).limit(max);
    await this.#deleteIds(rows.map((row) => row.id));
    return rows.map(toRecord);
  }

  async existing(ids: readonly string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (const chunk of chunks(ids)) {
      const rows: Pick<FileRow, 'id'>[] = await this.#knex<FileRow>(FILES).select('id').whereIn('id', chunk);
      for (const row of rows) found.add(row.id);
    }
    return found;
  }

  async #deleteIds(ids: readonly string[]): Promise<void> {
    for (const chunk of chunks(ids)) await this.#knex<FileRow>(FILES).whereIn('id', chunk).del();
  }
}
