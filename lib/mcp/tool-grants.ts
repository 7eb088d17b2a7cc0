import picomatch from 'picomatch';
import type { VerifiedKey } from '../state.js';

/** What a grant is, for error messages. */
export const MCP_TOOL_GLOB_RULE =
  "must be an array of globs over '{server}/{tool}' (e.g. 'github/*', 'search/web_search'): letters, digits, _ . - and the wildcards * and ?, one '/'";

// A server id and an MCP tool name (letters, digits, _ - ., at most 128), each with wildcards.
const GLOB = /^[\w.*?-]{1,128}\/[\w.*?-]{1,128}$/;

/**
 * True for a glob of `mcp_tools`: `{server}/{tool}`, `*` and `?` matching within one side.
 * @example ['github/*'].every(isMcpToolGlob)
 */
export function isMcpToolGlob(value: unknown): value is string {
  return typeof value === 'string' && GLOB.test(value);
}

/** What a key is granted: which tools, and which servers it may have a tool of (the others are not even asked for their list). */
export interface ToolGrant {
  tool(server: string, tool: string): boolean;
  server(server: string): boolean;
}

const GLOB_OPTIONS = { dot: true, nobrace: true, noextglob: true, noglobstar: true };

function matcherOf(globs: readonly string[]): (name: string) => boolean {
  if (globs.length === 0) return () => false;
  return picomatch([...globs], GLOB_OPTIONS);
}

/**
 * The grant of a key: a tool `{server}/{tool}` is granted when a glob of the key's AND one of its
 * account's match it (the intersection). Deny by default: an empty list on either side grants
 * nothing, so neither list can grant what the other withholds.
 * @example const granted = toolGrant(key.mcpTools ?? [], await accountGrants.get(key.account)); granted.tool('github', 'search')
 */
export function toolGrant(keyGlobs: readonly string[], accountGlobs: readonly string[]): ToolGrant {
  const keyValid = keyGlobs.filter(isMcpToolGlob);
  const accountValid = accountGlobs.filter(isMcpToolGlob);
  const byKey = matcherOf(keyValid);
  const byAccount = matcherOf(accountValid);
  const serverOf = (glob: string) => glob.slice(0, glob.indexOf('/'));
  const keyServers = matcherOf(keyValid.map(serverOf));
  const accountServers = matcherOf(accountValid.map(serverOf));
  return {
    tool(server, tool) {
      const name = `${server}/${tool}`;
      return byKey(name) && byAccount(name);
    },
    server: (server) => keyServers(server) && accountServers(server),
  };
}

/**
 * How `mcpGateway()` learns what a key may use, read once per request (and so again at every
 * `tools/call`): any function of the verified key to a `ToolGrant`.
 */
export type McpToolAccess = (key: VerifiedKey) => Promise<ToolGrant>;

/**
 * The default access rule: the key's `mcpTools` intersected with its account's grant.
 * @example mcpGateway({ upstreams, access: accountToolAccess(cachedMcpGrants(new KnexMcpGrantStore(knex))) })
 */
export function accountToolAccess(accounts: { get(account: string): Promise<readonly string[]> }): McpToolAccess {
  if (typeof accounts?.get !== 'function') throw new TypeError('koa-model-gateway: accountToolAccess() needs an McpGrantStore');
  return async (key) => toolGrant(key.mcpTools ?? [], await accounts.get(key.account));
}
