import type { Knex } from 'knex';
import { assertCanonicalAccountName } from '../../auth/account-name.js';
import {
  replacementKey,
  type ApiKeyRecord,
  type KeyCache,
  type KeyRevocation,
  type KeyRotation,
  type KeyRotationResult,
  type KeyStore,
  type KeyUpdate,
  type NewApiKey,
} from '../../auth/key-store.js';
import { assertKeyHint } from '../../auth/keys.js';
import type { Scope } from '../../auth/scopes.js';
import { StoreUnavailableError } from '../../errors/gateway-error.js';
import { hasModelLimits, type ModelLimits } from '../../quota/model-limits.js';
import { randomAlphanumeric } from '../../random.js';
import { firstRowReader } from './prepared-reads.js';
import { reportRows, type ReportReads } from './sqlite-writer.js';
import { storeTimeoutMs, transactionWithinTimeout, withinTimeout, type KnexStoreOptions } from './store-options.js';
import { wholeSeconds } from './whole-times.js';

const TABLE = 'kmg_api_keys';
const LIMIT_COLUMNS = {
  requestsPerMinute: 'limit_requests_per_minute',
  tokensPerMinute: 'limit_tokens_per_minute',
  tokensPerDay: 'limit_tokens_per_day',
  costPerDay: 'limit_cost_per_day',
  costPerMonth: 'limit_cost_per_month',
} as const satisfies Record<Exclude<keyof ModelLimits, 'costSoft' | 'costAlertThresholds'>, string>;
const ALERT_COLUMNS = ['limit_cost_soft', 'limit_cost_alert_thresholds'];
/** Key ids per statement of `touch`. */
const TOUCH_SLICE = 500;
const LINK_COLUMNS = ['name', 'hint', 'replaced_by', 'replaces', 'original_id', 'last_used_at', 'mcp_tools'];
const CACHE_COLUMNS = ['cache_ttl_seconds', 'cache_per_key'];
const COLUMNS = [
  'id',
  'account',
  'hash',
  'scopes',
  'models',
  'created_at',
  'expires_at',
  'revoked_at',
  ...Object.values(LIMIT_COLUMNS),
  ...ALERT_COLUMNS,
  ...LINK_COLUMNS,
  ...CACHE_COLUMNS,
];

interface KeyRow {
  id: string;
  account: string;
  hash: string;
  scopes: string;
  models: string | null;
  created_at: number | string;
  expires_at: number | string | null;
  revoked_at: number | string | null;
  name: string | null;
  hint: string | null;
  replaced_by: string | null;
  replaces: string | null;
  original_id: string | null;
  last_used_at: number | string | null;
  cache_ttl_seconds: number | null;
  cache_per_key: boolean | number;
  /** JSON array; null: no grant. */
  mcp_tools: string | null;
  limit_requests_per_minute: number | string | null;
  limit_tokens_per_minute: number | string | null;
  limit_tokens_per_day: number | string | null;
  limit_cost_per_day: number | null;
  limit_cost_per_month: number | null;
  /** SQLite keeps a boolean as 0 or 1; null: the deployment's default. */
  limit_cost_soft: boolean | number | null;
  /** JSON array of percents; null: the deployment's thresholds. */
  limit_cost_alert_thresholds: string | null;
}

/** An expiry as the bigint column keeps it: a fraction of a second dropped, so the key expires no later than asked. */
const expirySeconds = (expiresAt: number | null) => (expiresAt === null ? null : wholeSeconds(expiresAt));

// pg returns bigint columns as strings.
const integer = (value: number | string | null) => (value === null ? null : Number(value));

function toLimits(row: KeyRow): ModelLimits | undefined {
  const limits: ModelLimits = {};
  for (const [name, column] of Object.entries(LIMIT_COLUMNS)) {
    const value = integer(row[column]);
    if (value !== null) limits[name as keyof typeof LIMIT_COLUMNS] = value;
  }
  if (row.limit_cost_soft !== null) limits.costSoft = Boolean(row.limit_cost_soft);
  if (row.limit_cost_alert_thresholds !== null) limits.costAlertThresholds = JSON.parse(row.limit_cost_alert_thresholds) as number[];
  return Object.keys(limits).length > 0 ? limits : undefined;
}

function limitColumns(limits: ModelLimits | null | undefined) {
  return {
    ...Object.fromEntries(Object.entries(LIMIT_COLUMNS).map(([name, column]) => [column, limits?.[name as keyof typeof LIMIT_COLUMNS] ?? null])),
    limit_cost_soft: limits?.costSoft ?? null,
    limit_cost_alert_thresholds: limits?.costAlertThresholds === undefined ? null : JSON.stringify(limits.costAlertThresholds),
  };
}

// SQLite keeps a boolean as 0 or 1.
const cacheColumns = (cache: KeyCache | null | undefined) => ({ cache_ttl_seconds: cache?.ttlSeconds ?? null, cache_per_key: cache?.perKey === true });

function toCache(row: KeyRow): KeyCache | undefined {
  if (row.cache_ttl_seconds === null) return undefined;
  return { ttlSeconds: Number(row.cache_ttl_seconds), ...(Boolean(row.cache_per_key) && { perKey: true }) };
}

function toRow(record: ApiKeyRecord) {
  return {
    id: record.id,
    account: record.account,
    hash: record.hash,
    scopes: JSON.stringify(record.scopes),
    models: record.models === null ? null : JSON.stringify(record.models),
    created_at: record.createdAt,
    expires_at: record.expiresAt,
    revoked_at: null,
    ...limitColumns(record.limits),
    ...cacheColumns(record.cache),
    name: record.name ?? null,
    hint: record.hint ?? null,
    replaces: record.replaces ?? null,
    original_id: record.originalId ?? null,
    mcp_tools: mcpToolsColumn(record.mcpTools),
  };
}

const mcpToolsColumn = (tools: string[] | undefined) => (tools === undefined || tools.length === 0 ? null : JSON.stringify(tools));

function newRecord(key: NewApiKey, createdAt: number): ApiKeyRecord {
  const { limits, mcpTools, ...rest } = key;
  return {
    ...rest,
    ...(mcpTools !== undefined && mcpTools.length > 0 && { mcpTools: [...mcpTools] }),
    expiresAt: expirySeconds(key.expiresAt),
    ...(limits && hasModelLimits(limits) && { limits: structuredClone(limits) }),
    id: `key_${randomAlphanumeric(24)}`,
    createdAt,
    revokedAt: null,
  };
}

function toRecord(row: KeyRow): ApiKeyRecord {
  const limits = toLimits(row);
  const cache = toCache(row);
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
    ...(cache && { cache }),
    ...(row.name !== null && { name: row.name }),
    ...(row.hint !== null && { hint: row.hint }),
    ...(row.replaced_by !== null && { replacedBy: row.replaced_by }),
    ...(row.replaces !== null && { replaces: row.replaces }),
    ...(row.original_id !== null && { originalId: row.original_id }),
    ...(row.last_used_at !== null && { lastUsedAt: Number(row.last_used_at) }),
    ...(row.mcp_tools !== null && { mcpTools: JSON.parse(row.mcp_tools) as string[] }),
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
  readonly #reportReads: ReportReads | undefined;

  constructor(knex: Knex, options: KnexStoreOptions = {}) {
    this.#knex = knex;
    this.#timeoutMs = storeTimeoutMs(options);
    this.#reportReads = options.reportReads;
    this.#byHash = firstRowReader(options.preparedReads, (hash: string) => knex<KeyRow>(TABLE).where({ hash }).select(COLUMNS));
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const row = await withinTimeout(this.#timeoutMs, () => this.#byHash(hash));
    return row && toRecord(row);
  }

  async create(key: NewApiKey): Promise<ApiKeyRecord> {
    assertCanonicalAccountName(key.account);
    assertKeyHint(key.hint);
    const record = newRecord(key, Math.floor(Date.now() / 1000));
    await withinTimeout(this.#timeoutMs, async () => this.#knex<KeyRow>(TABLE).insert(toRow(record)));
    return record;
  }

  async get(id: string): Promise<ApiKeyRecord | undefined> {
    const row = await withinTimeout(this.#timeoutMs, async () => this.#knex<KeyRow>(TABLE).where({ id }).first());
    return row && toRecord(row);
  }

  async list(filter: { account?: string } = {}): Promise<ApiKeyRecord[]> {
    const query = this.#knex<KeyRow>(TABLE).orderBy('seq');
    if (filter.account !== undefined) query.where({ account: filter.account });
    return ((await withinTimeout(this.#timeoutMs, () => reportRows(query, this.#reportReads))) as KeyRow[]).map(toRecord);
  }

  async revoke(id: string): Promise<KeyRevocation> {
    const now = Math.floor(Date.now() / 1000);
    return withinTimeout(this.#timeoutMs, async () => {
      // One conditional write: of revocations at once, exactly one changes the row.
      const changed = await this.#knex<KeyRow>(TABLE).where({ id }).update({ revoked_at: now }).whereNull('revoked_at');
      if (changed > 0) return 'revoked';
      return (await this.#knex<KeyRow>(TABLE).where({ id }).first('id')) === undefined ? 'not_found' : 'already_revoked';
    });
  }

  async update(id: string, update: KeyUpdate): Promise<ApiKeyRecord | undefined> {
    const columns: Partial<KeyRow> = {};
    if (update.scopes !== undefined) columns.scopes = JSON.stringify(update.scopes);
    if (update.models !== undefined) columns.models = update.models === null ? null : JSON.stringify(update.models);
    if (update.expiresAt !== undefined) columns.expires_at = expirySeconds(update.expiresAt);
    // New limits replace the old ones whole: a limit left out is no longer the key's own.
    if (update.limits !== undefined) Object.assign(columns, limitColumns(update.limits));
    if (update.cache !== undefined) Object.assign(columns, cacheColumns(update.cache));
    if (update.name !== undefined) columns.name = update.name;
    if (update.mcpTools !== undefined) columns.mcp_tools = mcpToolsColumn(update.mcpTools);
    if (Object.keys(columns).length > 0) await withinTimeout(this.#timeoutMs, async () => this.#knex<KeyRow>(TABLE).where({ id }).update(columns));
    return this.get(id);
  }

  async rotate(id: string, rotation: KeyRotation): Promise<KeyRotationResult> {
    assertKeyHint(rotation.hint);
    const now = wholeSeconds(rotation.nowSeconds);
    const replacementId = `key_${randomAlphanumeric(24)}`;
    return transactionWithinTimeout(this.#knex, this.#timeoutMs, async (trx, expired): Promise<KeyRotationResult> => {
      // The first statement claims the key, where it is active and was never rotated: of
      // rotations running together, in any process, exactly one changes the row (PostgreSQL
      // checks the condition again once the row's lock is free, SQLite writes one at a time).
      const claimed = await trx<KeyRow>(TABLE)
        .where({ id })
        .whereNull('replaced_by')
        .whereNull('revoked_at')
        .where((query) => query.whereNull('expires_at').orWhere('expires_at', '>', now))
        .update({ replaced_by: replacementId });
      const row: KeyRow | undefined = await trx<KeyRow>(TABLE)
        .where({ id })
        .first(...COLUMNS);
      if (claimed === 0) {
        if (!row) return { outcome: 'not_found' };
        return { outcome: row.replaced_by === null ? 'not_active' : 'replaced' };
      }
      const old = toRecord(row as KeyRow);
      const replacement = {
        ...newRecord(replacementKey(old, rotation), now),
        id: replacementId,
        replaces: id,
        originalId: old.originalId ?? id,
      };
      await trx<KeyRow>(TABLE).insert(toRow(replacement));
      old.expiresAt = wholeSeconds(old.expiresAt === null ? rotation.graceEndsAt : Math.min(old.expiresAt, rotation.graceEndsAt));
      await trx<KeyRow>(TABLE).where({ id }).update({ expires_at: old.expiresAt });
      // Its caller was told that the rotation failed: roll back rather than commit.
      if (expired()) throw new StoreUnavailableError('the rotation outlasted its timeout');
      return { outcome: 'rotated', old, replacement };
    });
  }

  async touch(ids: readonly string[], atSeconds: number): Promise<void> {
    const at = wholeSeconds(atSeconds);
    await withinTimeout(this.#timeoutMs, async () => {
      // In slices: SQLite and PostgreSQL bound the parameters of one statement.
      for (let start = 0; start < ids.length; start += TOUCH_SLICE) {
        await this.#knex<KeyRow>(TABLE)
          .whereIn('id', ids.slice(start, start + TOUCH_SLICE))
          .where((query) => query.whereNull('last_used_at').orWhere('last_used_at', '<', at))
          .update({ last_used_at: at });
      }
    });
  }
}
