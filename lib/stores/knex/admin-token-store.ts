import type { Knex } from 'knex';
import { newAdminTokenRecord, type AdminTokenRecord, type AdminTokenStore, type NewAdminToken } from '../../admin/admin-token-store.js';

const TABLE = 'kmg_admin_tokens';

interface TokenRow {
  id: string;
  hash: string;
  name: string | null;
  created_at: number | string;
  revoked_at: number | string | null;
}

// pg returns bigint columns as strings.
const toRecord = (row: TokenRow): AdminTokenRecord => ({
  id: row.id,
  hash: row.hash,
  name: row.name,
  createdAt: Number(row.created_at),
  revokedAt: row.revoked_at === null ? null : Number(row.revoked_at),
});

/**
 * AdminTokenStore on Knex (PostgreSQL or SQLite), in a table of its own. Run `migrate(knex)` first.
 * @example adminAuth({ tokens: new KnexAdminTokenStore(knex) })
 */
export class KnexAdminTokenStore implements AdminTokenStore {
  readonly #knex: Knex;

  constructor(knex: Knex) {
    this.#knex = knex;
  }

  async findByHash(hash: string): Promise<AdminTokenRecord | undefined> {
    const row = await this.#knex<TokenRow>(TABLE).where({ hash }).first();
    return row && toRecord(row);
  }

  async get(id: string): Promise<AdminTokenRecord | undefined> {
    const row = await this.#knex<TokenRow>(TABLE).where({ id }).first();
    return row && toRecord(row);
  }

  async create(token: NewAdminToken): Promise<AdminTokenRecord> {
    const record = newAdminTokenRecord(token);
    await this.#knex<TokenRow>(TABLE).insert({
      id: record.id,
      hash: record.hash,
      name: record.name,
      created_at: record.createdAt,
      revoked_at: null,
    });
    return record;
  }

  async list(): Promise<AdminTokenRecord[]> {
    return (await this.#knex<TokenRow>(TABLE).orderBy('seq')).map(toRecord);
  }

  async revoke(id: string): Promise<boolean> {
    const now = Math.floor(Date.now() / 1000);
    const changed = await this.#knex<TokenRow>(TABLE).where({ id }).whereNull('revoked_at').update({ revoked_at: now });
    if (changed > 0) return true;
    return (await this.#knex<TokenRow>(TABLE).where({ id }).first('id')) !== undefined;
  }
}
