import type { McpGrantStore } from '../../mcp/grant-store.js';

/**
 * McpGrantStore in process memory: for tests and gateways without a database.
 * @example const grants = new MemoryMcpGrantStore()
 */
export class MemoryMcpGrantStore implements McpGrantStore {
  readonly #grants = new Map<string, string[]>();

  async get(account: string): Promise<string[]> {
    return [...(this.#grants.get(account) ?? [])];
  }

  async set(account: string, tools: readonly string[]): Promise<string[]> {
    const kept = [...new Set(tools)];
    if (kept.length === 0) this.#grants.delete(account);
    else this.#grants.set(account, kept);
    return [...kept];
  }
}
