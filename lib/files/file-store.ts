/** File metadata as stored. Times are Unix seconds. */
export interface FileRecord {
  /** A `newFileId(createdAt)` id: its byte order is creation order. */
  id: string;
  account: string;
  filename: string;
  bytes: number;
  createdAt: number;
  expiresAt: number | null;
}

/** What an account may keep at once (api.md section 8). */
export interface StockLimits {
  maxFiles: number;
  maxBytes: number;
}

/** What an account keeps: its live files and their bytes. */
export interface FileUsage {
  files: number;
  bytes: number;
}

export interface ListQuery {
  order: 'asc' | 'desc';
  limit: number;
  /** A file id: the page holds the files strictly after it in `order` (plain id comparison). */
  after?: string;
}

/**
 * Where file metadata lives. Every read takes `nowSeconds` (Unix seconds): a file with
 * `expiresAt <= nowSeconds` is gone from every method at once, before any sweep.
 * Implementations: memory, Knex (PostgreSQL, SQLite).
 */
export interface FileStore {
  /**
   * Inserts the file unless the account's live files would then exceed `limits`, decided
   * atomically with the insert so concurrent creations never push an account over.
   * Returns false (and inserts nothing) when over the limits.
   */
  create(file: FileRecord, limits: StockLimits, nowSeconds: number): Promise<boolean>;
  get(account: string, id: string, nowSeconds: number): Promise<FileRecord | undefined>;
  /** Ordered by id (creation order); `hasMore` is true exactly when more files follow. */
  list(account: string, query: ListQuery, nowSeconds: number): Promise<{ files: FileRecord[]; hasMore: boolean }>;
  /** Removes a live file; false when the account has no such live file. */
  delete(account: string, id: string, nowSeconds: number): Promise<boolean>;
  usage(account: string, nowSeconds: number): Promise<FileUsage>;
  /** Removes up to `max` expired records and returns them, so their blobs can be deleted. */
  removeExpired(nowSeconds: number, max: number): Promise<FileRecord[]>;
  /** Which of `ids` have a record, expired or not (for the orphan-blob sweep). */
  existing(ids: readonly string[]): Promise<Set<string>>;
}
