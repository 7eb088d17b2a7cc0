import type Router from '@koa/router';
import type { Logger } from 'pino';
import type { Deployment } from './deployment.js';

/**
 * `/mcp` of the reference server with `mcpServers` configured: `mcpGateway()` on the deployment's
 * account grants (read at most once a second per process), key limits, usage records (written off
 * the request's path) and metrics; a server left out or failing is logged in one line, without its
 * answer. `null` without servers.
 */
export function mcpEndpoint(deployment: Deployment, logger: Logger, traced: <Store extends object>(store: Store, name: string) => Store): Router | null {
  const { mcp } = deployment;
  if (!mcp) return null;
  const { cachedMcpGrants, mcpGateway } = mcp.library;
  const { listTimeoutMs, callTimeoutMs, bodyLimit } = deployment.config.gateway.mcp;
  return mcpGateway({
    upstreams: mcp.upstreams,
    accountGrants: cachedMcpGrants(traced(deployment.mcpGrants, 'McpGrantStore'), { ttlMs: 1000, nowMs: deployment.nowMs }),
    listTimeoutMs,
    callTimeoutMs,
    bodyLimit,
    limiter: traced(deployment.modelLimiter, 'ModelLimiter'),
    limits: deployment.config.gateway.modelLimits,
    onCall: (record) => deployment.mcpCallRecorder.record(record),
    ...(deployment.metrics && { metrics: deployment.metrics.metrics }),
    onUpstreamError: (server, err) =>
      logger.warn({ server, reason: err.name === 'McpUpstreamError' ? (err as { reason?: string }).reason : err.name }, 'MCP server failed'),
    nowMs: deployment.nowMs,
  });
}
