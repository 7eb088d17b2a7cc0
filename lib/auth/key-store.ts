import type { ModelLimits } from '../quota/model-limits.js';
import type { Scope } from './scopes.js';

/** A stored API key. The plaintext is never part of it. */
export interface ApiKeyRecord {
  id: string;
  account: string;
  /** SHA-256 (hex) of the whole key. */
  hash: string;
  scopes: Scope[];
  /** The model allowlist; `null` means every model of the catalog. */
  models: string[] | null;
  /**
   * The key's own limits on model calls, over the deployment's defaults; absent when it has none.
   * Stores keep only positive integers (`checkModelLimits`).
   */
  limits?: ModelLimits;
  /** Unix seconds. */
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
}

export type NewApiKey = Pick<ApiKeyRecord, 'account' | 'hash' | 'scopes' | 'models' | 'expiresAt' | 'limits'>;

/** Where API keys live. Implementations: memory, Knex (PostgreSQL, SQLite). */
export interface KeyStore {
  /** The key with this hash, revoked and expired ones included; `undefined` when there is none. */
  findByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  create(key: NewApiKey): Promise<ApiKeyRecord>;
  /** Keys in creation order, optionally of one account. */
  list(filter?: { account?: string }): Promise<ApiKeyRecord[]>;
  /** Marks the key revoked; false when no key has this id. Revoking twice keeps the first time. */
  revoke(id: string): Promise<boolean>;
}
