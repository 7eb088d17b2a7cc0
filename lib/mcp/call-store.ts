/** How a `tools/call` ended, as the usage record and the metric `kmg_mcp_calls_total` name it. */
export type McpCallOutcome =
  /** The tool answered. */
  | 'ok'
  /** The tool answered with `isError`: its own failure, reported to the model. */
  | 'tool_error'
  /** Outside the key's grant, or no such server: refused, nothing sent upstream. */
  | 'denied'
  /** The upstream answered an MCP error, or could not be reached. */
  | 'upstream_error'
  /** No answer within the call's timeout. */
  | 'timeout'
  /** The upstream asked for authorization (401/403). */
  | 'unauthorized';

/** One `tools/call`, as it is metered: written once when it ends, never changed. Not an audit row. */
export interface McpCallRecord {
  /** Unix ms at which the call was received. */
  time: number;
  /** The request id the client got (`X-Request-Id`). */
  requestId: string;
  keyId: string;
  account: string;
  /** The upstream server's id, as configured; for a name that names none, `''`. */
  server: string;
  /** The tool's name on its server (without the `{server}__` prefix). */
  tool: string;
  outcome: McpCallOutcome;
  /** From the call's dispatch to its answer, in ms. */
  durationMs: number;
  /** The call's `arguments` as JSON, in bytes. */
  requestBytes: number;
  /** The answer (result or error) as JSON, in bytes. */
  responseBytes: number;
}

/** Which records a read covers. Every field narrows it; none is every record. */
export interface McpCallFilter {
  account?: string;
  keyId?: string;
  /** Unix ms: records at or after it. */
  since?: number;
}

/** How summary rows are grouped: by server, by `{server}/{tool}`, or by key id. */
export type McpCallGrouping = 'server' | 'tool' | 'key';

/** Totals of the records in one group. */
export interface McpCallRow {
  group: string;
  calls: number;
  /** The calls whose outcome was not `ok`. */
  failed: number;
  durationMs: number;
  requestBytes: number;
  responseBytes: number;
}

/**
 * Where the tool calls' usage records live. Implementations: `MemoryMcpCallStore`,
 * `KnexMcpCallStore` (PostgreSQL, SQLite).
 */
export interface McpCallStore {
  /** Stores every record, or (on an error) none. */
  insert(records: readonly McpCallRecord[]): Promise<void>;
  /** Totals of the records matching `filter`, grouped `by`, in group order. */
  summarize(filter: McpCallFilter, by: McpCallGrouping): Promise<McpCallRow[]>;
}

/** The group of `record` under `by`: the one rule of every store. */
export function callGroup(record: Pick<McpCallRecord, 'server' | 'tool' | 'keyId'>, by: McpCallGrouping): string {
  if (by === 'server') return record.server;
  if (by === 'key') return record.keyId;
  return `${record.server}/${record.tool}`;
}
