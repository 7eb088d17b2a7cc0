import { randomAlphanumeric } from '../random.js';

/** Every admin action the audit log records. */
export const AUDIT_ACTIONS = [
  'key.created',
  'key.updated',
  'key.rotated',
  'key.revoked',
  'admin_token.created',
  'admin_token.revoked',
  'session.opened',
  'session.closed',
  'account.limits_set',
  'user.updated',
  'account.mcp_tools_set',
  'budget.alert_sent',
  'cache.purged',
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/**
 * What an action did, as a handler states it on `ctx.state.audit`: its names and ids, never a
 * secret, a key, a token or a hash.
 */
export interface AuditEvent {
  action: AuditAction;
  /** The key acted on (`key.*`). */
  keyId?: string;
  /** The account acted on, or the key's account. */
  account?: string;
  /** The admin token acted on (`admin_token.*`). */
  tokenId?: string;
  /** `key.rotated`: the new key. */
  replacementId?: string;
  /** The person acted on (`user.*`). */
  userId?: string;
  /** The names of the fields the request set (`key.updated`, `account.limits_set`, `key.created`); `budget.alert_sent`: the period, the threshold and the outcome (`day`, `80%`, `delivered` or `failed`). */
  fields?: string[];
  /** Each changed field's value before and after, where the handler knows both (never a secret). */
  changes?: AuditChanges;
}

/** Changed fields' values, before (`from`) and after (`to`), by field name. */
export type AuditChanges = Record<string, { from: unknown; to: unknown }>;

/**
 * The values of `fields` before and after a change, as the admin API shows the object (never a
 * secret: a key object has none), those that differ.
 * @example changedValues(keyObject(old, now), keyObject(updated, now), ['name', 'limits'])
 */
export function changedValues(before: object, after: object, fields: readonly string[]): AuditChanges {
  const changes: AuditChanges = {};
  for (const field of fields) {
    const from = (before as Record<string, unknown>)[field] ?? null;
    const to = (after as Record<string, unknown>)[field] ?? null;
    if (JSON.stringify(from) !== JSON.stringify(to)) changes[field] = { from, to };
  }
  return changes;
}

/** Who acted: an admin token (directly or through a dashboard session opened with it), a person signed in through the OIDC provider, the command line, or the gateway itself (`budget.alert_sent`). */
export type AuditActor =
  | {
      type: 'admin_token';
      /** The admin token's id. */
      id: string;
      /** Its name, `null` when unnamed. */
      name: string | null;
    }
  | {
      type: 'user';
      /** The user's id (`usr_…`). */
      id: string;
      /** Their email, else their name; `null` when the provider gave neither. */
      name: string | null;
    }
  | {
      type: 'cli';
      id: null;
      /** The operating system's user, when known. */
      name: string | null;
    }
  | {
      type: 'gateway';
      id: null;
      /** The gateway itself (a budget alert): no name. */
      name: null;
    };

/** One recorded admin action. */
export interface AuditEntry {
  /** `aud_` + 24 letters and digits. */
  id: string;
  /** When, in Unix seconds. */
  at: number;
  action: AuditAction;
  actor: AuditActor;
  keyId: string | null;
  account: string | null;
  tokenId: string | null;
  replacementId: string | null;
  /** The person acted on (`user.*`). */
  userId: string | null;
  fields: string[];
  /** The changed fields' values before and after, when the action states them. */
  changes: AuditChanges | null;
  /** The client's address (`ctx.ip`), `null` for the command line. */
  address: string | null;
}

export type NewAuditEntry = Omit<AuditEntry, 'id'>;

/**
 * The entry that records `event`, done by `actor` at `at` (Unix seconds) from `address`.
 * @example await store.append(auditEntry({ action: 'key.revoked', keyId }, { actor: { type: 'cli', id: null, name: 'alice' }, at, address: null }))
 */
export function auditEntry(event: AuditEvent, context: Pick<AuditEntry, 'actor' | 'at' | 'address'>): NewAuditEntry {
  return {
    at: context.at,
    action: event.action,
    actor: context.actor,
    keyId: event.keyId ?? null,
    account: event.account ?? null,
    tokenId: event.tokenId ?? null,
    replacementId: event.replacementId ?? null,
    userId: event.userId ?? null,
    fields: event.fields ?? [],
    changes: event.changes ?? null,
    address: context.address,
  };
}

/** `entry` with a new id, as a store records it. */
export const withAuditId = (entry: NewAuditEntry): AuditEntry => ({ id: `aud_${randomAlphanumeric(24)}`, ...entry });

/** Which entries to list; every filter optional. */
export interface AuditFilter {
  /** Entries at or after this time, in Unix seconds. */
  since?: number;
  action?: AuditAction;
  /** Entries about this key: acted on, or made by rotating another. */
  keyId?: string;
  account?: string;
}

export interface AuditPage {
  /** Newest first. */
  entries: AuditEntry[];
  /** Pass as `cursor` for the next (older) page; `null` on the last page. */
  nextCursor: string | null;
}

/** A cursor as the stores issue it: the position of an entry in the log, a positive decimal integer. */
export const AUDIT_CURSOR = /^[1-9]\d{0,15}$/;

/**
 * Where the audit log lives: appended to, never changed. Implementations: memory, Knex
 * (PostgreSQL, SQLite). Run the same contract against each (`test/contracts/audit-store.ts`).
 */
export interface AuditStore {
  /** Records `entry` and returns it with its id. */
  append(entry: NewAuditEntry): Promise<AuditEntry>;
  /**
   * Up to `limit` entries matching `filter`, newest first (in the order they were appended), older
   * than the entry the `cursor` (from a previous page, matching `AUDIT_CURSOR`) points past.
   */
  list(filter: AuditFilter, page: { limit: number; cursor?: string }): Promise<AuditPage>;
}
