import type { Knex } from 'knex';
import type { ApiKeyRecord, KeyStore, NewApiKey } from '../../auth/key-store.js';
import type { Scope } from '../../auth/scopes.js';
import { randomAlphanumeric } from '../../errors/request-id.js';
import { firstRowReader } from './prepared-reads.js';
import { storeTimeoutMs, withinTimeout, type KnexStoreOptions } from './store-options.js';

const TABLE = 'kmg_api_keys';
const COLUMNS = ['id', 'account', 'hash', 'scopes', 'models', 'created_at', 'expires_at', 'revoked_at'];

interface KeyRow {
  id: string;
  account: string;
  hash: string;
  scopes: string;
  models: string | null;
  created_at: number | string;
  expires_at: number | string | null;
  revoked_at: number | string | null;
}

// pg returns bigint columns as strings.
const seconds = (value: number | string | null) => (value === null ? null : Number(value));

function toRecord(row: KeyRow): ApiKeyRecord {
  return {
    id: row.id,
    account: row.account,
    hash: row.hash,
    scopes: JSON.parse(row.scopes) as Scope[],
    models: row.models === null ? null : (JSON.parse(row.models) as string[]),
    createdAt: Number(row.created_at),
    expiresAt: seconds(row.expires_at),
    revokedAt: seconds(row.revoked_at),
  };
}

/**
 * KeyStore on Knex (PostgreSQL or SQLite). Run `migrate(knex)` first. Every call fails within
 * `timeoutMs` (options: `KnexStoreOptions`).
 * @example apiKey({ store: new KnexKeyStore(knex) })
 */
export class KnexKeyStore implements KeyStore {
  readonly #knex: Knex;
  readonly #timeoutMs: number;
  // Every request looks its key up: a prepared statement where `preparedReads` is given.
  readonly #byHash: (hash: string) => KeyRow | undefined | Promise<KeyRow | undefined>;

  constructor(knex: Knex, options: KnexStoreOptions = {}) {
    this.#knex = knex;
    this.#timeoutMs = storeTimeoutMs(options);
    this.#byHash = firstRowReader(options.preparedReads, (hash: string) => knex<KeyRow>(TABLE).where({ hash }).select(COLUMNS));
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const row = await withinTimeout(this.#timeoutMs, () => this.#byHash(hash));
    return row && toRecord(row);
  }

  async create(key: NewApiKey): Promise<ApiKeyRecord> {
    const record: ApiKeyRecord = {
      ...key,
      id: `key_${randomAlphanumeric(24)}`,
      createdAt: Math.floor(Date.now() / 1000),
      revokedAt: null,
    };
    const row = {
      id: record.id,
      account: record.account,
      hash: record.hash,
      scopes: JSON.stringify(record.scopes),
      models: record.models === null ? null : JSON.stringify(record.models),
      created_at: record.createdAt,
      expires_at: record.expiresAt,
      revoked_at: null,
    };
    await withinTimeout(this.#timeoutMs, async () => this.#knex<KeyRow>(TABLE).insert(row));
    return record;
  }

  async list(filter: { account?: string } = {}): Promise<ApiKeyRecord[]> {
    const query = this.#knex<KeyRow>(TABLE).orderBy('seq');
    if (filter.account !== undefined) query.where({ account: filter.account });
    return (await withinTimeout(this.#timeoutMs, async () => query)).map(toRecord);
  }

  async revoke(id: string): Promise<boolean> {
    const now = Math.floor(Date.now() / 1000);
    return withinTimeout(this.#timeoutMs, async () => {
      const changed = await this.#knex<KeyRow>(TABLE).where({ id }).update({ revoked_at: now }).whereNull('revoked_at');
      if (changed > 0) return true;
      return (await this.#knex<KeyRow>(TABLE).where({ id }).first('id')) !== undefined;
    });
  }
}
