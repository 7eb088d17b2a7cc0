import { newAdminTokenRecord, type AdminTokenRecord, type AdminTokenStore, type NewAdminToken } from '../../admin/admin-token-store.js';

/**
 * AdminTokenStore in process memory: for tests and single-process gateways.
 * @example adminAuth({ tokens: new MemoryAdminTokenStore() })
 */
export class MemoryAdminTokenStore implements AdminTokenStore {
  readonly #byHash = new Map<string, AdminTokenRecord>();

  async findByHash(hash: string): Promise<AdminTokenRecord | undefined> {
    const record = this.#byHash.get(hash);
    return record && { ...record };
  }

  async get(id: string): Promise<AdminTokenRecord | undefined> {
    const record = this.#byId(id);
    return record && { ...record };
  }

  async create(token: NewAdminToken): Promise<AdminTokenRecord> {
    if (this.#byHash.has(token.hash)) throw new Error('koa-model-gateway: a token with this hash exists');
    const record = newAdminTokenRecord(token);
    this.#byHash.set(token.hash, record);
    return { ...record };
  }

  async list(): Promise<AdminTokenRecord[]> {
    return [...this.#byHash.values()].map((record) => ({ ...record }));
  }

  async revoke(id: string): Promise<boolean> {
    const record = this.#byId(id);
    if (!record) return false;
    record.revokedAt ??= Math.floor(Date.now() / 1000);
    return true;
  }

  #byId(id: string): AdminTokenRecord | undefined {
    return [...this.#byHash.values()].find((candidate) => candidate.id === id);
  }
}
