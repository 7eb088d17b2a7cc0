import type { FileRecord, FileStore, ListQuery, StockLimits, FileUsage } from '../../files/file-store.js';

const isLive = (file: FileRecord, nowSeconds: number) => file.expiresAt === null || file.expiresAt > nowSeconds;

/**
 * FileStore in process memory: for tests, examples and single-process gateways. Every method
 * runs without awaiting in between, so the limit check and the insert of `create` are atomic.
 * @example
 * const files = new MemoryFileStore();
 * const created = await files.create(record, { maxFiles: 1000, maxBytes: 100_000_000 }, nowSeconds);
 */
export class MemoryFileStore implements FileStore {
  readonly #byId = new Map<string, FileRecord>();

  async create(file: FileRecord, limits: StockLimits, nowSeconds: number): Promise<boolean> {
    if (this.#byId.has(file.id)) throw new Error('koa-model-gateway: a file with this id exists');
    const usage = this.#usage(file.account, nowSeconds);
    if (usage.files + 1 > limits.maxFiles || usage.bytes + file.bytes > limits.maxBytes) return false;
    this.#byId.set(file.id, { ...file });
    return true;
  }

  async get(account: string, id: string, nowSeconds: number): Promise<FileRecord | undefined> {
    const file = this.#live(account, id, nowSeconds);
    return file && { ...file };
  }

  async list(account: string, query: ListQuery, nowSeconds: number): Promise<{ files: FileRecord[]; hasMore: boolean }> {
    const { after } = query;
    const direction = query.order === 'asc' ? 1 : -1;
    const page = [...this.#byId.values()]
      .filter((file) => file.account === account && isLive(file, nowSeconds))
      .filter((file) => after === undefined || (direction === 1 ? file.id > after : file.id < after))
      .sort((a, b) => (a.id < b.id ? -direction : a.id > b.id ? direction : 0));
    return { files: page.slice(0, query.limit).map((file) => ({ ...file })), hasMore: page.length > query.limit };
  }

  async delete(account: string, id: string, nowSeconds: number): Promise<boolean> {
    if (this.#live(account, id, nowSeconds) === undefined) return false;
    return this.#byId.delete(id);
  }

  async usage(account: string, nowSeconds: number): Promise<FileUsage> {
    return this.#usage(account, nowSeconds);
  }

  async removeExpired(nowSeconds: number, max: number): Promise<FileRecord[]> {
    const removed: FileRecord[] = [];
    for (const file of this.#byId.values()) {
      if (removed.length >= max) break;
      if (isLive(file, nowSeconds)) continue;
      this.#byId.delete(file.id);
      removed.push(file);
    }
    return removed;
  }

  async existing(ids: readonly string[]): Promise<Set<string>> {
    return new Set(ids.filter((id) => this.#byId.has(id)));
  }

  #live(account: string, id: string, nowSeconds: number): FileRecord | undefined {
    const file = this.#byId.get(id);
    return file && file.account === account && isLive(file, nowSeconds) ? file : undefined;
  }

  #usage(account: string, nowSeconds: number): FileUsage {
    const usage = { files: 0, bytes: 0 };
    for (const file of this.#byId.values()) {
      if (file.account !== account || !isLive(file, nowSeconds)) continue;
      usage.files += 1;
      usage.bytes += file.bytes;
    }
    return usage;
  }
}
