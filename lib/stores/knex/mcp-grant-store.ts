import type { Knex } from 'knex';
import type { McpGrantStore } from '../../mcp/grant-store.js';
import { storeTimeoutMs, withinTimeout, type KnexStoreOptions } from './store-options.js';

const TABLE = 'kmg_mcp_account_grants';

/**
 * McpGrantStore on Knex (PostgreSQL or SQLite), in the table `kmg_mcp_account_grants`. Run
 * `migrate(knex)` first. Every call fails within `timeoutMs` (options: `KnexStoreOptions`).
 * @example accountToolAccess(cachedMcpGrants(new KnexMcpGrantStore(knex)))
 */
export class KnexMcpGrantStore implements McpGrantStore {
  readonly #knex: Knex;
  readonly #timeoutMs: number;

  constructor(knex: Knex, options: KnexStoreOptions = {}) {
    this.#knex = knex;
    this.#timeoutMs = storeTimeoutMs(options);
  }

  async get(account: string): Promise<string[]> {
    const row = (await withinTimeout(this.#timeoutMs, async () => this.#knex(TABLE).where({ account }).first('tools'))) as { tools: string } | undefined;
    return row === undefined ? [] : (JSON.parse(row.tools) as string[]);
  }

  /** One statement: the last of two changes at once wins whole. */
  async set(account: string, tools: readonly string[]): Promise<string[]> {
    const kept = [...new Set(tools)];
    await withinTimeout(this.#timeoutMs, async () =>
      kept.length === 0
        ? this.#knex(TABLE).where({ account }).delete()
        : this.#knex(TABLE)
            .insert({ account, tools: JSON.stringify(kept) })
            .onConflict('account')
            .merge(),
    );
    return kept;
  }
}
