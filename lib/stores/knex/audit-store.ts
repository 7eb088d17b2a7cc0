import type { Knex } from 'knex';
import {
  withAuditId,
  type AuditAction,
  type AuditChanges,
  type AuditActor,
  type AuditEntry,
  type AuditFilter,
  type AuditPage,
  type AuditStore,
  type NewAuditEntry,
} from '../../admin/audit-store.js';
import { storeTimeoutMs, withinTimeout, type KnexStoreOptions } from './store-options.js';

const TABLE = 'kmg_audit_log';

interface AuditRow {
  seq: number | string;
  id: string;
  at: number | string;
  action: string;
  actor_type: string;
  actor_id: string | null;
  actor_name: string | null;
  key_id: string | null;
  account: string | null;
  token_id: string | null;
  replacement_id: string | null;
  user_id: string | null;
  fields: string;
  changes: string | null;
  address: string | null;
}

function toActor(row: AuditRow): AuditActor {
  if (row.actor_type === 'cli') return { type: 'cli', id: null, name: row.actor_name };
  if (row.actor_type === 'gateway') return { type: 'gateway', id: null, name: null };
  return { type: row.actor_type === 'user' ? 'user' : 'admin_token', id: row.actor_id ?? '', name: row.actor_name };
}

// pg returns bigint columns as strings.
const toEntry = (row: AuditRow): AuditEntry => ({
  id: row.id,
  at: Number(row.at),
  action: row.action as AuditAction,
  actor: toActor(row),
  keyId: row.key_id,
  account: row.account,
  tokenId: row.token_id,
  replacementId: row.replacement_id,
  userId: row.user_id,
  fields: JSON.parse(row.fields) as string[],
  changes: row.changes === null ? null : (JSON.parse(row.changes) as AuditChanges),
  address: row.address,
});

/**
 * AuditStore on Knex (PostgreSQL or SQLite), in a table of its own. Run `migrate(knex)` first.
 * Every call fails within `timeoutMs` (options: `KnexStoreOptions`; `preparedReads` is not used).
 * @example auditTrail({ store: new KnexAuditStore(knex) })
 */
export class KnexAuditStore implements AuditStore {
  readonly #knex: Knex;
  readonly #timeoutMs: number;

  constructor(knex: Knex, options: KnexStoreOptions = {}) {
    this.#knex = knex;
    this.#timeoutMs = storeTimeoutMs(options);
  }

  async append(entry: NewAuditEntry): Promise<AuditEntry> {
    const recorded = withAuditId(entry);
    const row: Omit<AuditRow, 'seq'> = {
      id: recorded.id,
      at: recorded.at,
      action: recorded.action,
      actor_type: recorded.actor.type,
      actor_id: recorded.actor.id,
      actor_name: recorded.actor.name,
      key_id: recorded.keyId,
      account: recorded.account,
      token_id: recorded.tokenId,
      replacement_id: recorded.replacementId,
      user_id: recorded.userId,
      fields: JSON.stringify(recorded.fields),
      changes: recorded.changes === null ? null : JSON.stringify(recorded.changes),
      address: recorded.address,
    };
    await withinTimeout(this.#timeoutMs, async () => this.#knex(TABLE).insert(row));
    return recorded;
  }

  async list(filter: AuditFilter, page: { limit: number; cursor?: string }): Promise<AuditPage> {
    const rows = await withinTimeout(this.#timeoutMs, async () => {
      const query = this.#knex<AuditRow>(TABLE)
        .orderBy('seq', 'desc')
        .limit(page.limit + 1);
      if (page.cursor !== undefined) query.where('seq', '<', Number(page.cursor));
      if (filter.since !== undefined) query.where('at', '>=', filter.since);
      if (filter.action !== undefined) query.where('action', filter.action);
      if (filter.account !== undefined) query.where('account', filter.account);
      const { keyId } = filter;
      if (keyId !== undefined) query.where((about) => about.where('key_id', keyId).orWhere('replacement_id', keyId));
      return query;
    });
    const more = rows.length > page.limit;
    const kept = more ? rows.slice(0, page.limit) : rows;
    return { entries: kept.map(toEntry), nextCursor: more ? String(kept.at(-1)?.seq) : null };
  }
}
