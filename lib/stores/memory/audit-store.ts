import { withAuditId, type AuditEntry, type AuditFilter, type AuditPage, type AuditStore, type NewAuditEntry } from '../../admin/audit-store.js';

const matches = (entry: AuditEntry, filter: AuditFilter) =>
  (filter.since === undefined || entry.at >= filter.since) &&
  (filter.action === undefined || entry.action === filter.action) &&
  (filter.keyId === undefined || entry.keyId === filter.keyId || entry.replacementId === filter.keyId) &&
  (filter.account === undefined || entry.account === filter.account);

const copy = (entry: AuditEntry): AuditEntry => ({
  ...entry,
  actor: { ...entry.actor },
  fields: [...entry.fields],
  changes: entry.changes && structuredClone(entry.changes),
});

/**
 * AuditStore in process memory: for tests and single-process gateways (the log ends with the process).
 * @example auditTrail({ store: new MemoryAuditStore() })
 */
export class MemoryAuditStore implements AuditStore {
  /** Oldest first: an entry's cursor is its position + 1. */
  readonly #entries: AuditEntry[] = [];

  async append(entry: NewAuditEntry): Promise<AuditEntry> {
    const recorded = withAuditId(entry);
    this.#entries.push(copy(recorded));
    return recorded;
  }

  async list(filter: AuditFilter, page: { limit: number; cursor?: string }): Promise<AuditPage> {
    const entries: AuditEntry[] = [];
    let position = page.cursor === undefined ? this.#entries.length : Math.min(Number(page.cursor) - 1, this.#entries.length);
    while (position > 0 && entries.length <= page.limit) {
      position -= 1;
      const entry = this.#entries[position] as AuditEntry;
      if (matches(entry, filter)) entries.push(copy(entry));
    }
    if (entries.length <= page.limit) return { entries, nextCursor: null };
    entries.pop();
    return { entries, nextCursor: String(position + 2) };
  }
}
