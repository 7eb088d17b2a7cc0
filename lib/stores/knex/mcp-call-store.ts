import type { Knex } from 'knex';
import type { McpCallFilter, McpCallGrouping, McpCallRecord, McpCallRow, McpCallStore } from '../../mcp/call-store.js';
import { storeTimeoutMs, withinTimeout, type KnexStoreOptions } from './store-options.js';

const TABLE = 'kmg_mcp_calls';
/** Rows per insert statement: SQLite and PostgreSQL bound the parameters of one. */
const INSERT_SLICE = 500;

/** The SQL of a group: the same as `callGroup()`. */
const GROUP_SQL: Record<McpCallGrouping, string> = { server: 'server', key: 'key_id', tool: "server || '/' || tool" };

/**
 * McpCallStore on Knex (PostgreSQL or SQLite), in the table `kmg_mcp_calls`. Run `migrate(knex)`
 * first. Every call fails within `timeoutMs` (options: `KnexStoreOptions`).
 * @example mcpGateway({ upstreams, accountGrants, onCall: (record) => void calls.insert([record]) })
 */
export class KnexMcpCallStore implements McpCallStore {
  readonly #knex: Knex;
  readonly #timeoutMs: number;

  constructor(knex: Knex, options: KnexStoreOptions = {}) {
    this.#knex = knex;
    this.#timeoutMs = storeTimeoutMs(options);
  }

  async insert(records: readonly McpCallRecord[]): Promise<void> {
    if (records.length === 0) return;
    const rows = records.map((record) => ({
      time: Math.floor(record.time),
      request_id: record.requestId,
      key_id: record.keyId,
      account: record.account,
      server: record.server,
      tool: record.tool,
      outcome: record.outcome,
      duration_ms: Math.floor(record.durationMs),
      request_bytes: record.requestBytes,
      response_bytes: record.responseBytes,
    }));
    await withinTimeout(this.#timeoutMs, async () =>
      this.#knex.transaction(async (trx) => {
        for (let start = 0; start < rows.length; start += INSERT_SLICE) await trx(TABLE).insert(rows.slice(start, start + INSERT_SLICE));
      }),
    );
  }

  async summarize(filter: McpCallFilter, by: McpCallGrouping): Promise<McpCallRow[]> {
    const knex = this.#knex;
    const group = GROUP_SQL[by];
    const query = knex(TABLE)
      .select(knex.raw(`${group} as "group"`))
      .count({ calls: '*' })
      .sum({ failed: knex.raw("case when outcome = 'ok' then 0 else 1 end") })
      .sum({ duration_ms: 'duration_ms', request_bytes: 'request_bytes', response_bytes: 'response_bytes' })
      .groupByRaw(group)
      .orderByRaw(group);
    if (filter.account !== undefined) query.where({ account: filter.account });
    if (filter.keyId !== undefined) query.where({ key_id: filter.keyId });
    if (filter.since !== undefined) query.where('time', '>=', filter.since);
    const rows = (await withinTimeout(this.#timeoutMs, async () => query)) as Array<Record<string, string | number>>;
    // pg returns sums and counts of bigints as strings.
    return rows.map((row) => ({
      group: String(row.group),
      calls: Number(row.calls),
      failed: Number(row.failed),
      durationMs: Number(row.duration_ms),
      requestBytes: Number(row.request_bytes),
      responseBytes: Number(row.response_bytes),
    }));
  }
}
