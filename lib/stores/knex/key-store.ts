import type { Knex } from 'knex';
import type { ApiKeyRecord, KeyStore, KeyUpdate, NewApiKey } from '../../auth/key-store.js';
import type { Scope } from '../../auth/scopes.js';
import { hasModelLimits, type ModelLimits } from '../../quota/model-limits.js';
import { randomAlphanumeric } from '../../random.js';
import { firstRowReader } from './prepared-reads.js';
import { storeTimeoutMs, withinTimeout, type KnexStoreOptions } from './store-options.js';

const TABLE = 'kmg_api_keys';
const LIMIT_COLUMNS = {
  requestsPerMinute: 'limit_requests_per_minute',
  tokensPerMinute: 'limit_tokens_per_minute',
  tokensPerDay: 'limit_tokens_per_day',
  costPerDay: 'limit_cost_per_day',
  costPerMonth: 'limit_cost_per_month',
} as const satisfies Record<keyof ModelLimits, string>;
const COLUMNS = ['id', 'account', 'hash', 'scopes', 'models', 'created_at', 'expires_at', 'revoked_at', ...Object.values(LIMIT_COLUMNS)];

interface KeyRow {
  id: string;
  account: string;
  hash: string;
  scopes: string;
  models: string | null;
  created_at: number | string;
  expires_at: number | string | null;
  revoked_at: number | string | null;
  limit_requests_per_minute: number | string | null;
  limit_tokens_per_minute: number | string | null;
  limit_tokens_per_day: number | string | null;
  limit_cost_per_day: number | null;
  limit_cost_per_month: number | null;
}

// pg returns bigint columns as strings.
const integer = (value: number | string | null) => (value === null ? null : Number(value));

function toLimits(row: KeyRow): ModelLimits | undefined {
  const limits: ModelLimits = {};
  for (const [name, column] of Object.entries(LIMIT_COLUMNS)) {
    const value = integer(row[column]);
    if (value !== null) limits[name as keyof ModelLimits] = value;
  }
  return Object.keys(limits).length > 0 ? limits : undefined;
}

function limitColumns(limits: ModelLimits | null | undefined) {
  return Object.fromEntries(Object.entries(LIMIT_COLUMNS).map(([name, column]) => [column, limits?.[name as keyof ModelLimits] ?? null]));
}

function toRecord(row: KeyRow): ApiKeyRecord {
  const limits = toLimits(row);
  return {
    id: row.id,
    account: row.account,
    hash: row.hash,
    scopes: JSON.parse(row.scopes) as Scope[],
    models: row.models === null ? null : (JSON.parse(row.models) as string[]),
    createdAt: Number(row.created_at),
    expiresAt: integer(row.expires_at),
    revokedAt: integer(row.revoked_at),
    ...(limits && { limits }),
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
    const { limits, ...rest } = key;
    const record: ApiKeyRecord = {
      ...rest,
      ...(limits && hasModelLimits(limits) && { limits: { ...limits } }),
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
      ...limitColumns(record.limits),
    };
    await withinTimeout(this.#timeoutMs, async () => this.#knex<KeyRow>(TABLE).insert(row));
    return record;
  }

  async get(id: string): Promise<ApiKeyRecord | undefined> {
    const row = await withinTimeout(this.#timeoutMs, async () => this.#knex<KeyRow>(TABLE).where({ id }).first());
    return row && toRecord(row);
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

  async update(id: string, update: KeyUpdate): Promise<ApiKeyRecord | undefined> {
    const columns: Partial<KeyRow> = {};
    if (update.scopes !== undefined) columns.scopes = JSON.stringify(update.scopes);
    if (update.models !== undefined) columns.models = update.models === null ? null : JSON.stringify(update.models);
    if (update.expiresAt !== undefined) columns.expires_at = update.expiresAt;
    // New limits replace the old ones whole: a limit left out is no longer the key's own.
    if (update.limits !== undefined) Object.assign(columns, limitColumns(update.limits));
    if (Object.keys(columns).length > 0) await withinTimeout(this.#timeoutMs, async () => this.#knex<KeyRow>(TABLE).where({ id }).update(columns));
    return this.get(id);
  }
}
