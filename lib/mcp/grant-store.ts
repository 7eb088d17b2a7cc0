import { cachedReads, type CachedReadsOptions } from '../cached-reads.js';

/**
 * Where the accounts' MCP grants are kept: per account, globs over `{server}/{tool}`
 * (`isMcpToolGlob`). Implementations: `MemoryMcpGrantStore`, `KnexMcpGrantStore` (PostgreSQL,
 * SQLite).
 */
export interface McpGrantStore {
  /** The account's globs, in the order set; `[]` for an account without a grant. */
  get(account: string): Promise<string[]>;
  /** Replaces the account's globs (`[]` removes its grant) and answers them as kept. */
  set(account: string, tools: readonly string[]): Promise<string[]>;
}

/**
 * The accounts' grants read through a cache of `ttlMs` (default 1 s), so that an MCP request does
 * not wait on the database for them: a change reaches every process within `ttlMs`.
 * @example accountToolAccess(cachedMcpGrants(new KnexMcpGrantStore(knex)))
 */
export function cachedMcpGrants(store: Pick<McpGrantStore, 'get'>, options: CachedReadsOptions = {}): Pick<McpGrantStore, 'get'> {
  if (typeof store?.get !== 'function') throw new TypeError('koa-model-gateway: cachedMcpGrants() needs an McpGrantStore');
  return { get: cachedReads((account) => store.get(account), options, 'cachedMcpGrants()') };
}
