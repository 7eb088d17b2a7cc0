import { assertCanonicalAccountName } from '../../auth/account-name.js';
import {
  replacementKey,
  type ApiKeyRecord,
  type KeyRevocation,
  type KeyRotation,
  type KeyRotationResult,
  type KeyStore,
  type KeyUpdate,
  type NewApiKey,
} from '../../auth/key-store.js';
import { assertKeyHint, keyStatus } from '../../auth/keys.js';
import { randomAlphanumeric } from '../../random.js';
import { hasModelLimits } from '../../quota/model-limits.js';

/** `update` applied to `record` in place: `null` or empty limits remove them. */
function applyKeyUpdate(record: ApiKeyRecord, update: KeyUpdate): void {
  const { limits, cache, name, mcpTools, ...rest } = structuredClone(update);
  Object.assign(record, rest);
  if (mcpTools !== undefined && mcpTools.length === 0) delete record.mcpTools;
  else if (mcpTools !== undefined) record.mcpTools = mcpTools;
  if (name === null) delete record.name;
  else if (name !== undefined) record.name = name;
  if (rest.expiresAt != null) record.expiresAt = Math.floor(rest.expiresAt);
  if (limits === null || (limits !== undefined && !hasModelLimits(limits))) delete record.limits;
  else if (limits !== undefined) record.limits = limits;
  if (cache === null) delete record.cache;
  else if (cache !== undefined) record.cache = cache;
}

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
    assertCanonicalAccountName(key.account);
    assertKeyHint(key.hint);
    return this.#create(key, Math.floor(Date.now() / 1000));
  }

  async get(id: string): Promise<ApiKeyRecord | undefined> {
    const record = this.#byId(id);
    return record && structuredClone(record);
  }

  async list(filter: { account?: string } = {}): Promise<ApiKeyRecord[]> {
    return [...this.#byHash.values()]
      .filter((record) => filter.account === undefined || record.account === filter.account)
      .map((record) => structuredClone(record));
  }

  async revoke(id: string): Promise<KeyRevocation> {
    const record = this.#byId(id);
    if (!record) return 'not_found';
    if (record.revokedAt !== null) return 'already_revoked';
    record.revokedAt = Math.floor(Date.now() / 1000);
    return 'revoked';
  }

  async update(id: string, update: KeyUpdate): Promise<ApiKeyRecord | undefined> {
    const record = this.#byId(id);
    if (!record) return undefined;
    applyKeyUpdate(record, update);
    return structuredClone(record);
  }

  async rotate(id: string, rotation: KeyRotation): Promise<KeyRotationResult> {
    assertKeyHint(rotation.hint);
    const old = this.#byId(id);
    if (!old) return { outcome: 'not_found' };
    if (old.replacedBy !== undefined) return { outcome: 'replaced' };
    if (keyStatus(old, rotation.nowSeconds) !== 'active') return { outcome: 'not_active' };
    const replacement = this.#create(replacementKey(old, rotation), Math.floor(rotation.nowSeconds), {
      replaces: id,
      originalId: old.originalId ?? id,
    });
    old.replacedBy = replacement.id;
    old.expiresAt = Math.floor(Math.min(old.expiresAt ?? Infinity, rotation.graceEndsAt));
    return { outcome: 'rotated', old: structuredClone(old), replacement };
  }

  async touch(ids: readonly string[], atSeconds: number): Promise<void> {
    const at = Math.floor(atSeconds);
    for (const id of ids) {
      const record = this.#byId(id);
      if (record && (record.lastUsedAt ?? -Infinity) < at) record.lastUsedAt = at;
    }
  }

  #create(key: NewApiKey, createdAt: number, links?: Pick<ApiKeyRecord, 'replaces' | 'originalId'>): ApiKeyRecord {
    if (this.#byHash.has(key.hash)) throw new Error('koa-model-gateway: a key with this hash exists');
    const { limits, mcpTools, ...rest } = structuredClone(key);
    const record: ApiKeyRecord = {
      ...rest,
      ...(mcpTools !== undefined && mcpTools.length > 0 && { mcpTools }),
      // Whole seconds, as the Knex store keeps them: the key expires no later than asked.
      expiresAt: rest.expiresAt === null ? null : Math.floor(rest.expiresAt),
      ...(limits && hasModelLimits(limits) && { limits }),
      id: `key_${randomAlphanumeric(24)}`,
      createdAt,
      revokedAt: null,
      ...links,
    };
    this.#byHash.set(key.hash, record);
    return structuredClone(record);
  }

  #byId(id: string): ApiKeyRecord | undefined {
    return [...this.#byHash.values()].find((candidate) => candidate.id === id);
  }
}
