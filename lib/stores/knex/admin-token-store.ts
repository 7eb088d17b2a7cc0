import type { Knex } from 'knex';
import { newAdminTokenRecord, type AdminTokenRecord, type AdminTokenStore, type NewAdminToken } from '../../admin/admin-token-store.js';
import { storeTimeoutMs, withinTimeout, type KnexStoreOptions } from './store-options.js';

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
 * Every call fails within `timeoutMs` (options: `KnexStoreOptions`; `preparedReads` is not used).
 * @example adminAuth({ tokens: new KnexAdminTokenStore(knex) })
 */
export class KnexAdminTokenStore implements AdminTokenStore {
  readonly #knex: Knex;
  readonly #timeoutMs: number;

  constructor(knex: Knex, options: KnexStoreOptions = {}) {
    this.#knex = knex;
    this.#timeoutMs = storeTimeoutMs(options);
  }

  async findByHash(hash: string): Promise<AdminTokenRecord | undefined> {
    const row = await withinTimeout(this.#timeoutMs, async () => this.#knex<TokenRow>(TABLE).where({ hash }).first());
    return row && toRecord(row);
  }

  async get(id: string): Promise<AdminTokenRecord | undefined> {
    const row = await withinTimeout(this.#timeoutMs, async () => this.#knex<TokenRow>(TABLE).where({ id }).first());
    return row && toRecord(row);
  }

  async create(token: NewAdminToken): Promise<AdminTokenRecord> {
    const record = newAdminTokenRecord(token);
    const row = { id: record.id, hash: record.hash, name: record.name, created_at: record.createdAt, revoked_at: null };
    await withinTimeout(this.#timeoutMs, async () => this.#knex<TokenRow>(TABLE).insert(row));
    return record;
  }

  async list(): Promise<AdminTokenRecord[]> {
    return (await withinTimeout(this.#timeoutMs, async () => this.#knex<TokenRow>(TABLE).orderBy('seq'))).map(toRecord);
  }

  async revoke(id: string): Promise<boolean> {
    const now = Math.floor(Date.now() / 1000);
    return withinTimeout(this.#timeoutMs, async () => {
      const changed = await this.#knex<TokenRow>(TABLE).where({ id }).whereNull('revoked_at').update({ revoked_at: now });
      if (changed > 0) return true;
      return (await this.#knex<TokenRow>(TABLE).where({ id }).first('id')) !== undefined;
    });
  }
}
