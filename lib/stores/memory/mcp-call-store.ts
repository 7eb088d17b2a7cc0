import { callGroup, type McpCallFilter, type McpCallGrouping, type McpCallRecord, type McpCallRow, type McpCallStore } from '../../mcp/call-store.js';

/**
 * McpCallStore in process memory: for tests and gateways without a database.
 * @example mcpGateway({ upstreams, accountGrants, calls: new MemoryMcpCallStore() })
 */
export class MemoryMcpCallStore implements McpCallStore {
  readonly #records: McpCallRecord[] = [];

  async insert(records: readonly McpCallRecord[]): Promise<void> {
    this.#records.push(...records.map((record) => ({ ...record })));
  }

  async summarize(filter: McpCallFilter, by: McpCallGrouping): Promise<McpCallRow[]> {
    const rows = new Map<string, McpCallRow>();
    for (const record of this.#records) {
      if (filter.account !== undefined && record.account !== filter.account) continue;
      if (filter.keyId !== undefined && record.keyId !== filter.keyId) continue;
      if (filter.since !== undefined && record.time < filter.since) continue;
      const group = callGroup(record, by);
      const row = rows.get(group) ?? { group, calls: 0, failed: 0, durationMs: 0, requestBytes: 0, responseBytes: 0 };
      row.calls += 1;
      if (record.outcome !== 'ok') row.failed += 1;
      row.durationMs += Math.floor(record.durationMs);
      row.requestBytes += record.requestBytes;
      row.responseBytes += record.responseBytes;
      rows.set(group, row);
    }
    return [...rows.values()].sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : 0));
  }
}
