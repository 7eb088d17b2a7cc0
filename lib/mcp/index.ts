/**
 * `koa-model-gateway/mcp`: one MCP endpoint in front of several upstream MCP servers, on the official
 * `@modelcontextprotocol/sdk` (which only this entry point loads).
 */
export { mcpGateway, MCP_SERVER_ID_RULE, type McpGatewayOptions } from './mcp-gateway.js';
export { httpMcpUpstream, McpUpstreamError, type HttpMcpUpstreamOptions, type McpUpstream } from './upstream.js';
export { clientCredentials, type ClientCredentialsOptions } from './client-credentials.js';
export { accountToolAccess, isMcpToolGlob, MCP_TOOL_GLOB_RULE, toolGrant, type McpToolAccess, type ToolGrant } from './tool-grants.js';
export { cachedMcpGrants, type McpGrantStore } from './grant-store.js';
export {
  callGroup,
  type McpCallFilter,
  type McpCallGrouping,
  type McpCallOutcome,
  type McpCallRecord,
  type McpCallRow,
  type McpCallStore,
} from './call-store.js';
export type { ToolCallStart, ToolCallTrace } from '../state.js';
// The memory implementations, at home in stores/memory, exported here too.
export { MemoryMcpGrantStore } from '../stores/memory/mcp-grant-store.js';
export { MemoryMcpCallStore } from '../stores/memory/mcp-call-store.js';
