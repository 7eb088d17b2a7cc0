import { performance } from 'node:perf_hooks';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { verifiedKey } from '../auth/api-key.js';
import { errors } from '../errors/gateway-error.js';
import { readJsonValue } from '../http/json-body.js';
import type { GatewayMetrics } from '../metrics/gateway-metrics.js';
import type { ModelLimiter } from '../quota/model-limiter.js';
import { checkModelLimits, type ModelLimits } from '../quota/model-limits.js';
import { modelLimitRefusal } from '../quota/rate-limit-headers.js';
import { parseOptions, positiveInteger } from '../settings/schemas.js';
import type { VerifiedKey } from '../state.js';
import type { McpCallOutcome, McpCallRecord } from './call-store.js';
import { accountToolAccess, type McpToolAccess, type ToolGrant } from './tool-grants.js';
import { McpUpstreamError, type McpUpstream } from './upstream.js';

/** Server ids: letters, digits and `-`, so that `{id}__{tool}` splits at its first `__`. */
export const MCP_SERVER_ID_RULE = 'must be 1 to 64 letters, digits and -, starting with a letter or digit';
const SERVER_ID = /^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/;
const SEPARATOR = '__';

export interface McpGatewayOptions {
  /** The upstream servers, each with a unique id (`httpMcpUpstream()`, or any `McpUpstream`). */
  upstreams: readonly McpUpstream[];
  /** Where accounts' grants are read (`cachedMcpGrants(store)`): the default `access` rule. */
  accountGrants?: { get(account: string): Promise<readonly string[]> };
  /** What a key may use; default `accountToolAccess(accountGrants)`, the key's grant intersected with its account's. */
  access?: McpToolAccess;
  /** The path answered. Default `'/mcp'`. */
  path?: string;
  /** The bound on each server's part of `tools/list`, in ms: a server slower than it, or down, is left out. Default 2,000. */
  listTimeoutMs?: number;
  /** The bound on one `tools/call`, in ms. Default 60,000. */
  callTimeoutMs?: number;
  /** The largest request body, in bytes (413 over it). Default 10 MiB, as model calls. */
  bodyLimit?: number;
  /** Counts each `tools/call` against the key's request limits (429 over them). Default: none. */
  limiter?: ModelLimiter;
  /** The deployment's default limits, under the key's own. Default `{}`. */
  limits?: ModelLimits;
  /** Where each `tools/call`'s usage record goes (no I/O on the request's path: queue it). Default: none. */
  onCall?: (record: McpCallRecord) => void;
  /** `kmg_mcp_calls_total`. Default: none. */
  metrics?: Pick<GatewayMetrics, 'observeToolCall'>;
  /** Hears a server left out of a list or failing a call (the client hears only that it failed). Default: none. */
  onUpstreamError?: (server: string, err: Error) => void;
  /** Default `Date.now`. */
  nowMs?: () => number;
}

const optionsSchema = z.looseObject({
  path: z
    .string()
    .regex(/^\/[^?#]*$/, { error: "must be a path starting with '/'" })
    .default('/mcp'),
  listTimeoutMs: positiveInteger.default(2000),
  callTimeoutMs: positiveInteger.default(60_000),
  bodyLimit: positiveInteger.default(10 * 1024 * 1024),
});

/** The JSON-RPC `tools/call` requests of a body, one message or a batch. */
function toolCallsOf(body: unknown): Array<{ name: unknown }> {
  const messages = Array.isArray(body) ? body : [body];
  return messages
    .filter(
      (message): message is { params: { name: unknown } } =>
        typeof message === 'object' && message !== null && message.method === 'tools/call' && typeof message.params === 'object' && message.params !== null,
    )
    .map((message) => ({ name: message.params.name }));
}

/** `{server}__{tool}` split at its first `__`; `undefined` for a name of no such form. */
function splitName(name: unknown): { server: string; tool: string } | undefined {
  if (typeof name !== 'string') return undefined;
  const at = name.indexOf(SEPARATOR);
  if (at < 1) return undefined;
  return { server: name.slice(0, at), tool: name.slice(at + SEPARATOR.length) };
}

/** `promise`, or a rejection once `ms` have passed: a hard bound whatever the upstream does. */
function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new McpUpstreamError('timeout')), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value ?? null));

/** A failure of an upstream as the client hears it: an MCP error naming the server, never its internals. */
function clientError(server: string, err: unknown, timeoutMs: number): { outcome: McpCallOutcome; error: McpError } {
  // McpError's constructor writes "MCP error <code>: " before a message: the upstream's, once.
  if (err instanceof McpError) return { outcome: 'upstream_error', error: new McpError(err.code, err.message.replace(/^MCP error -?\d+: /, ''), err.data) };
  const reason = err instanceof McpUpstreamError ? err.reason : 'unavailable';
  if (reason === 'timeout') {
    return {
      outcome: 'timeout',
      error: new McpError(ErrorCode.RequestTimeout, `MCP server '${server}' did not answer within ${timeoutMs} ms`, { server, reason }),
    };
  }
  if (reason === 'unauthorized') {
    return {
      outcome: 'unauthorized',
      error: new McpError(ErrorCode.InternalError, `MCP server '${server}' refused the gateway's authorization`, { server, reason }),
    };
  }
  return { outcome: 'upstream_error', error: new McpError(ErrorCode.InternalError, `MCP server '${server}' is unavailable`, { server, reason }) };
}

/**
 * One MCP endpoint in front of several upstream MCP servers, over Streamable HTTP, on the official
 * `@modelcontextprotocol/sdk` (every protocol version it supports). Stateless: each POST is
 * answered by a server made for it, so any instance behind a balancer answers any request of a
 * client, and no session is kept anywhere. A router of the one route `POST {path}`: with its
 * `allowedMethods()`, GET and DELETE (a stream or a session the stateless mode has none of) are 405.
 *
 * - `tools/list`: every server's tools, named `{serverId}__{tool}`, those outside the key's grant
 *   left out (a server the key has no tool of is not asked); a server down or slower than
 *   `listTimeoutMs` is left out and the others answer.
 * - `tools/call`: the grant checked again (`access`, at dispatch), then the key's request limits
 *   (429, nothing sent), then the server's tool within `callTimeoutMs`. A tool outside the grant and
 *   an unknown one are the same MCP error (-32602). The server's MCP errors come back as they are;
 *   a timeout, an unreachable server or its 401/403 are MCP errors naming the server. The client's
 *   key is never sent upstream.
 * - each call: one usage record (`onCall`), `kmg_mcp_calls_total`, an `execute_tool` span.
 *
 * Runs after `apiKey()`; the key needs the scope `mcp:call` (403).
 * @example
 * const mcp = mcpGateway({ upstreams: [httpMcpUpstream({ id: 'github', url })], accountGrants })
 * app.use(underPath('/mcp', apiKey({ store }))).use(mcp.routes()).use(mcp.allowedMethods())
 */
export function mcpGateway(options: McpGatewayOptions): Router {
  const { path, listTimeoutMs, callTimeoutMs, bodyLimit } = parseOptions(optionsSchema, options, 'mcpGateway()');
  const limits = checkModelLimits(options.limits ?? {}, 'mcpGateway() limits');
  const { limiter, onCall, metrics, onUpstreamError, nowMs = Date.now } = options;
  const upstreams = new Map<string, McpUpstream>();
  for (const upstream of options.upstreams ?? []) {
    if (!SERVER_ID.test(upstream?.id ?? ''))
      throw new TypeError(`koa-model-gateway: mcpGateway(): server id ${JSON.stringify(upstream?.id)} ${MCP_SERVER_ID_RULE}`);
    // Ids without '__' and unique: two servers' tool names can never collide.
    if (upstreams.has(upstream.id)) throw new TypeError(`koa-model-gateway: mcpGateway(): two servers have the id '${upstream.id}'`);
    upstreams.set(upstream.id, upstream);
  }
  if (options.access === undefined && options.accountGrants === undefined) {
    throw new TypeError('koa-model-gateway: mcpGateway() needs `accountGrants` (an McpGrantStore) or an `access` rule');
  }
  const access = options.access ?? accountToolAccess(options.accountGrants as NonNullable<McpGatewayOptions['accountGrants']>);
  // The tools each server last listed: the metric's tool label never holds a name a client made up.
  const listed = new Map<string, Set<string>>();

  async function listOne(upstream: McpUpstream, granted: ToolGrant): Promise<Tool[]> {
    try {
      const tools = await within(listTimeoutMs, upstream.listTools({ timeoutMs: listTimeoutMs }));
      listed.set(upstream.id, new Set(tools.map((tool) => tool.name)));
      return tools.filter((tool) => granted.tool(upstream.id, tool.name)).map((tool) => ({ ...tool, name: `${upstream.id}${SEPARATOR}${tool.name}` }));
    } catch (err) {
      onUpstreamError?.(upstream.id, err as Error);
      return [];
    }
  }

  function serverFor(ctx: Context, key: VerifiedKey, granted: ToolGrant): Server {
    const server = new Server({ name: 'koa-model-gateway', version: '1' }, { capabilities: { tools: { listChanged: false } } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: (
        await Promise.all([...upstreams.values()].filter((upstream) => granted.server(upstream.id)).map((upstream) => listOne(upstream, granted)))
      ).flat(),
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
      const time = nowMs();
      const started = performance.now();
      const { name, arguments: args } = request.params;
      const parts = splitName(name);
      const upstream = parts && upstreams.get(parts.server);
      const server = upstream ? upstream.id : '';
      const tool = parts?.tool ?? name;
      const trace = ctx.state.tracing?.tool?.({ server, tool, callId: String(extra.requestId) });
      let outcome: McpCallOutcome = 'denied';
      let answer: unknown;
      try {
        // Checked where the call happens, whatever the list showed: a grant revoked since is refused.
        if (!upstream || !granted.tool(upstream.id, tool)) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
        try {
          const result = await within(callTimeoutMs, upstream.callTool(tool, args, { timeoutMs: callTimeoutMs, ...(trace && { headers: trace.headers }) }));
          outcome = result.isError === true ? 'tool_error' : 'ok';
          answer = result;
          return result;
        } catch (err) {
          if (!(err instanceof McpError)) onUpstreamError?.(server, err as Error);
          const failure = clientError(server, err, callTimeoutMs);
          outcome = failure.outcome;
          throw failure.error;
        }
      } catch (err) {
        answer = { code: (err as McpError).code, message: (err as McpError).message };
        throw err;
      } finally {
        const known = listed.get(server)?.has(tool) === true;
        trace?.end(outcome === 'ok' ? undefined : outcome);
        metrics?.observeToolCall({ server: server || '_unknown', tool: known ? tool : '_other', outcome });
        onCall?.({
          time,
          requestId: ctx.state.requestId ?? '',
          keyId: key.id,
          account: key.account,
          server,
          tool: tool.slice(0, 128),
          outcome,
          durationMs: performance.now() - started,
          requestBytes: jsonBytes(args),
          responseBytes: jsonBytes(answer),
        });
      }
    });
    return server;
  }

  const router = new Router({ sensitive: true, strict: true });
  // Stateless: no stream of the server's own to GET, no session to DELETE.
  router.post(path, async function mcpGateway(ctx) {
    const key = verifiedKey(ctx);
    if (!key.scopes.includes('mcp:call')) throw errors.forbidden();
    const body = await readJsonValue(ctx.req, bodyLimit);
    const granted = await access(key);
    if (limiter) {
      const keyLimits = { ...limits, ...key.limits };
      // A call that will be dispatched counts once; refused ones, as at the model endpoints, do not.
      for (const { name } of toolCallsOf(body)) {
        const parts = splitName(name);
        if (!parts || !upstreams.has(parts.server) || !granted.tool(parts.server, parts.tool)) continue;
        const decision = await limiter.consume(key.id, keyLimits);
        if (!decision.allowed) throw modelLimitRefusal(decision, 'openai');
      }
    }
    const server = serverFor(ctx, key, granted);
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
    await server.connect(transport);
    ctx.respond = false;
    ctx.res.once('close', () => void server.close().catch(() => {}));
    await transport.handleRequest(ctx.req, ctx.res, body);
  });
  return router;
}
