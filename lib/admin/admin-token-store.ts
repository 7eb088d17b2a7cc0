import { randomAlphanumeric } from '../random.js';

/** A stored admin token. The plaintext is never part of it. */
export interface AdminTokenRecord {
  /** `adm_` + 24 letters and digits. */
  id: string;
  /** SHA-256 (hex) of the whole token. */
  hash: string;
  /** What the token is for, as its creator put it; `null` when unnamed. */
  name: string | null;
  /** Unix seconds. */
  createdAt: number;
  revokedAt: number | null;
}

export type NewAdminToken = Pick<AdminTokenRecord, 'hash' | 'name'>;

/** The record a store keeps for `token`: a new id, created now, not revoked. */
export function newAdminTokenRecord(token: NewAdminToken): AdminTokenRecord {
  return {
    id: `adm_${randomAlphanumeric(24)}`,
    hash: token.hash,
    name: token.name,
    createdAt: Math.floor(Date.now() / 1000),
    revokedAt: null,
  };
}

/**
 * Where admin tokens live: apart from API keys, so that a lookup of one kind can never find a
 * credential of the other. Implementations: memory, Knex (PostgreSQL, SQLite).
 */
export interface AdminTokenStore {
  /** The token with this hash, revoked ones included; `undefined` when there is none. */
  findByHash(hash: string): Promise<AdminTokenRecord | undefined>;
  get(id: string): Promise<AdminTokenRecord | undefined>;
  create(token: NewAdminToken): Promise<AdminTokenRecord>;
  /** Every token, in creation order. */
  list(): Promise<AdminTokenRecord[]>;
  /** Marks the token revoked; false when no token has this id. Revoking twice keeps the first time. */
  revoke(id: string): Promise<boolean>;
}
