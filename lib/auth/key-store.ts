import type { ModelLimits } from '../quota/model-limits.js';
import type { Scope } from './scopes.js';

/** A key's response caching: its calls' answers kept `ttlSeconds`, in its account's entries or, with `perKey`, in its own. */
export interface KeyCache {
  ttlSeconds: number;
  perKey?: boolean;
}

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
  /** The key's own response caching (`{ ttlSeconds, perKey? }`); absent when it has none (its models' settings apply). */
  cache?: KeyCache;
  /** Unix seconds. */
  createdAt: number;
  /** Unix seconds; stores keep whole seconds (a fraction is dropped: the key expires no later than asked). */
  expiresAt: number | null;
  revokedAt: number | null;
  /** What the operator calls the key (1 to 100 printable characters); absent when unnamed. */
  name?: string;
  /** The secret's last four characters, to tell keys apart (`kmg_sk_…3tKs`): never more of it. */
  hint?: string;
  /** The id of the key that replaced this one in a rotation. */
  replacedBy?: string;
  /** The id of the key this one replaced in a rotation. */
  replaces?: string;
  /**
   * The id of the first key of its rotations, on a replacement (absent on a key that replaced
   * none): every key of one line of rotations spends against one budget, the original's.
   */
  originalId?: string;
  /** Unix seconds: when a request last came with the key, to the minute (`keyUseRecorder`); absent when never. */
  lastUsedAt?: number;
  /** The key's MCP grant: globs over `{server}/{tool}` (`isMcpToolGlob`); absent when it has none (no tool). */
  mcpTools?: string[];
}

export type NewApiKey = Pick<ApiKeyRecord, 'account' | 'hash' | 'scopes' | 'models' | 'expiresAt' | 'limits' | 'cache' | 'name' | 'hint' | 'mcpTools'>;

/**
 * The new key of a rotation as `KeyStore.rotate()` creates it: the old key's account, scopes,
 * models, expiry, limits, caching, name and MCP grant, with the rotation's hash and hint; one rule
 * for every store.
 */
export function replacementKey(old: ApiKeyRecord, rotation: Pick<KeyRotation, 'hash' | 'hint'>): NewApiKey {
  const { account, scopes, models, expiresAt, limits, cache, name, mcpTools } = old;
  return {
    account,
    hash: rotation.hash,
    scopes,
    models,
    expiresAt,
    ...(limits && { limits }),
    ...(cache && { cache }),
    ...(name !== undefined && { name }),
    ...(mcpTools && { mcpTools }),
    ...(rotation.hint !== undefined && { hint: rotation.hint }),
  };
}

/** What `KeyStore.update` may change; a field left out stays as it is. */
export interface KeyUpdate {
  scopes?: Scope[];
  models?: string[] | null;
  /** `null` removes the key's own limits. */
  limits?: ModelLimits | null;
  /** `null` removes the key's own caching. */
  cache?: KeyCache | null;
  expiresAt?: number | null;
  /** `null` removes the name. */
  name?: string | null;
  /** `[]` removes the key's MCP grant. */
  mcpTools?: string[];
}

/** What `KeyStore.rotate` is given. */
export interface KeyRotation {
  /** The new key's hash (SHA-256, hex, of the whole key). */
  hash: string;
  /** Unix seconds: the old key must be active (neither revoked nor expired) now. */
  nowSeconds: number;
  /** Unix seconds at which the old key stops working, unless it expires sooner. */
  graceEndsAt: number;
  /** The new key's `hint`: the last four characters of its secret. */
  hint?: string;
}

/**
 * What came of a rotation: the old key as it now is and its replacement; or why there was none:
 * no key has the id, the key is revoked or expired, or it was rotated before (it has a
 * replacement already, whether or not its grace has ended).
 */
export type KeyRotationResult = { outcome: 'rotated'; old: ApiKeyRecord; replacement: ApiKeyRecord } | { outcome: 'not_found' | 'not_active' | 'replaced' };

/**
 * What came of a revocation: `revoked` by this call; `already_revoked` before it (its time kept,
 * nothing changed); `not_found`: no key has the id.
 */
export type KeyRevocation = 'revoked' | 'already_revoked' | 'not_found';

/** Where API keys live. Implementations: memory, Knex (PostgreSQL, SQLite). */
export interface KeyStore {
  /** The key with this hash, revoked and expired ones included; `undefined` when there is none. */
  findByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  /** Rejects with a `TypeError` an account name not in its canonical form (`canonicalAccountName`). */
  create(key: NewApiKey): Promise<ApiKeyRecord>;
  /** The key with this id, revoked and expired ones included. */
  get(id: string): Promise<ApiKeyRecord | undefined>;
  /** Keys in creation order, optionally of one account. */
  list(filter?: { account?: string }): Promise<ApiKeyRecord[]>;
  /**
   * Marks the key revoked. Revoking twice keeps the first time and says `already_revoked`: of
   * revocations made at once, in any number of processes, exactly one is `revoked`.
   */
  revoke(id: string): Promise<KeyRevocation>;
  /** Applies `update` and returns the key as it now is; `undefined` when no key has this id. */
  update(id: string, update: KeyUpdate): Promise<ApiKeyRecord | undefined>;
  /**
   * Replaces the key `id`, once: creates a key with `rotation.hash` and the old key's account,
   * scopes, models, limits, expiry, name and MCP grant, linked to it (`replaces`, and the old key's `replacedBy`) and
   * to the first key of its rotations (`originalId`: the old key's, or the old key's id), and sets the old key's expiry to `graceEndsAt` (or keeps
   * its own when sooner). Only an active key that was never rotated is: of rotations of one key
   * made at the same time, in any number of processes, exactly one succeeds.
   */
  rotate(id: string, rotation: KeyRotation): Promise<KeyRotationResult>;
  /**
   * Sets `lastUsedAt` of the keys `ids` to `atSeconds` (whole seconds), unless a later time is
   * kept already. Unknown ids are skipped. Called in batches by `keyUseRecorder`, never per request.
   */
  touch(ids: readonly string[], atSeconds: number): Promise<void>;
}
