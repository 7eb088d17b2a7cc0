import type { ApiKeyRecord, KeyStore, NewApiKey } from '../../auth/key-store.js';
import { randomAlphanumeric } from '../../random.js';
import { hasModelLimits } from '../../quota/model-limits.js';

/**
 * KeyStore in process memory: for tests, examples and single-process gateways.
 * @example apiKey({ store: new MemoryKeyStore() })
 */
export class MemoryKeyStore implements KeyStore {
  readonly #byHash = new Map<string, ApiKeyRecord>();

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const record = this.#byHash.get(hash);
    return record && structuredClone(record);
  }

  async create(key: NewApiKey): Promise<ApiKeyRecord> {
    if (this.#byHash.has(key.hash)) throw new Error('koa-model-gateway: a key with this hash exists');
    const { limits, ...rest } = structuredClone(key);
    const record: ApiKeyRecord = {
      ...rest,
      ...(limits && hasModelLimits(limits) && { limits }),
      id: `key_${randomAlphanumeric(24)}`,
      createdAt: Math.floor(Date.now() / 1000),
      revokedAt: null,
    };
    this.#byHash.set(key.hash, record);
    return structuredClone(record);
  }

  async list(filter: { account?: string } = {}): Promise<ApiKeyRecord[]> {
    return [...this.#byHash.values()]
      .filter((record) => filter.account === undefined || record.account === filter.account)
      .map((record) => structuredClone(record));
  }

  async revoke(id: string): Promise<boolean> {
    const record = [...this.#byHash.values()].find((candidate) => candidate.id === id);
    if (!record) return false;
    record.revokedAt ??= Math.floor(Date.now() / 1000);
    return true;
  }
}
