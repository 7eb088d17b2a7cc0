import { AsyncLocalStorage } from 'node:async_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';

/**
 * One upstream MCP server as `mcpGateway()` calls it. `httpMcpUpstream()` makes one for a server
 * over Streamable HTTP; any object of this shape will do (a server in process, a test double).
 */
export interface McpUpstream {
  /** The server's id: its tools are `{id}__{tool}` to clients, its grants `{id}/{tool}`. */
  readonly id: string;
  /** Every tool of the server; rejects past `timeoutMs`. */
  listTools(options: { timeoutMs: number }): Promise<Tool[]>;
  /**
   * Calls one tool; rejects past `timeoutMs`. An `McpError` is the server's own answer, passed
   * back to the client; `McpUpstreamError` says why there was none.
   */
  callTool(
    tool: string,
    args: Record<string, unknown> | undefined,
    options: { timeoutMs: number; headers?: Readonly<Record<string, string>> },
  ): Promise<CallToolResult>;
  close?(): Promise<void>;
}

/** Why an upstream gave no answer: `unauthorized` for its 401/403, `timeout`, else `unavailable`. */
export class McpUpstreamError extends Error {
  readonly reason: 'unauthorized' | 'timeout' | 'unavailable';

  constructor(reason: McpUpstreamError['reason'], options?: ErrorOptions) {
    super(`MCP upstream ${reason}`, options);
    this.name = 'McpUpstreamError';
    this.reason = reason;
  }
}

export interface HttpMcpUpstreamOptions {
  id: string;
  /** The server's Streamable HTTP endpoint. */
  url: string;
  /** Headers sent with every request. The client's own key is never among them. */
  headers?: Record<string, string>;
  /** Headers computed per request, after `headers`: a credential read or refreshed (`clientCredentials()`). */
  authorization?: () => Promise<Record<string, string>>;
  /** The largest answer read from the server, in bytes. Default 16 MiB. */
  maxAnswerBytes?: number;
  /** Default: the global `fetch`. */
  fetch?: typeof fetch;
}

const DEFAULT_MAX_ANSWER_BYTES = 16 * 1024 * 1024;

// The headers of the call under way (its trace context): the SDK's client sends its requests from
// within the call, on one connection shared by every call.
const callHeaders = new AsyncLocalStorage<Readonly<Record<string, string>>>();
const MAX_PAGES = 20;

/** `response` whose body errors once more than `limit` bytes have come. */
export function boundedAnswer(response: Response, limit: number): Response {
  if (response.body === null) return response;
  let size = 0;
  const counted = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        size += chunk.byteLength;
        if (size > limit) controller.error(new McpUpstreamError('unavailable', { cause: new Error(`answer over ${limit} bytes`) }));
        else controller.enqueue(chunk);
      },
    }),
  );
  return new Response(counted, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** `err` as the gateway tells it: the server's MCP error as it is, anything else a reason. */
function upstreamFailure(err: unknown): Error {
  if (err instanceof McpUpstreamError) return err;
  if (err instanceof McpError) {
    // The SDK's own two codes: no answer came, rather than the server's error.
    if (err.code === ErrorCode.RequestTimeout) return new McpUpstreamError('timeout', { cause: err });
    if (err.code === ErrorCode.ConnectionClosed) return new McpUpstreamError('unavailable', { cause: err });
    return err;
  }
  if (err instanceof StreamableHTTPError && (err.code === 401 || err.code === 403)) return new McpUpstreamError('unauthorized', { cause: err });
  if (err instanceof Error && err.name === 'UnauthorizedError') return new McpUpstreamError('unauthorized', { cause: err });
  return new McpUpstreamError('unavailable', { cause: err });
}

/**
 * An upstream MCP server over Streamable HTTP, through the official SDK's client. One connection
 * (initialize, then the server's session if it keeps one) is made on first use and kept; a
 * failure that is not the server's own answer drops it, and the next call connects again. Each
 * request is bounded by its `timeoutMs`, each answer by `maxAnswerBytes`.
 * @example const github = httpMcpUpstream({ id: 'github', url: 'https://mcp.example.com/mcp', headers: { authorization: `Bearer ${token}` } })
 */
export function httpMcpUpstream(options: HttpMcpUpstreamOptions): McpUpstream {
  const { id, url, headers = {}, authorization, maxAnswerBytes = DEFAULT_MAX_ANSWER_BYTES } = options;
  const fetchFn = options.fetch ?? fetch;
  if (!URL.canParse(url)) throw new TypeError(`koa-model-gateway: httpMcpUpstream(): server '${id}' needs an http(s) url`);
  let connected: Promise<Client> | undefined;

  const credentials = async () => {
    try {
      return authorization ? await authorization() : {};
    } catch (err) {
      // The token endpoint refused or failed: the server cannot be called, for want of authorization.
      throw new McpUpstreamError('unauthorized', { cause: err });
    }
  };

  const upstreamFetch = async (target: string | URL, init?: RequestInit): Promise<Response> => {
    const merged = new Headers(init?.headers);
    for (const [name, value] of Object.entries({ ...callHeaders.getStore(), ...headers, ...(await credentials()) })) merged.set(name, value);
    return boundedAnswer(await fetchFn(target, { ...init, headers: merged }), maxAnswerBytes);
  };

  const connect = (timeoutMs: number) => {
    connected ??= (async () => {
      const client = new Client({ name: 'koa-model-gateway', version: '1' });
      await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: upstreamFetch }), { timeout: timeoutMs });
      return client;
    })();
    return connected;
  };

  /**
   * `action` on the connection, within `timeoutMs` in all. A server that could not be reached or
   * refused the gateway loses its connection; a slow one keeps it for the calls still under way.
   */
  const withClient = async <T>(timeoutMs: number, action: (client: Client, timeout: number) => Promise<T>): Promise<T> => {
    const started = Date.now();
    const current = connect(timeoutMs);
    try {
      const client = await current;
      return await action(client, Math.max(1, timeoutMs - (Date.now() - started)));
    } catch (err) {
      const failure = upstreamFailure(err);
      if (failure instanceof McpUpstreamError && failure.reason !== 'timeout' && connected === current) {
        connected = undefined;
        void current.then((client) => client.close()).catch(() => {});
      }
      throw failure;
    }
  };

  return {
    id,
    async listTools({ timeoutMs }) {
      return withClient(timeoutMs, async (client, timeout) => {
        const tools: Tool[] = [];
        let cursor: string | undefined;
        // Pages until the server says there are no more, within the one timeout and a page bound.
        for (let page = 0; page < MAX_PAGES; page += 1) {
          const answer = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout });
          tools.push(...answer.tools);
          cursor = answer.nextCursor;
          if (cursor === undefined) break;
        }
        return tools;
      });
    },
    async callTool(tool, args, { timeoutMs, headers: traceHeaders = {} }) {
      return callHeaders.run(traceHeaders, () =>
        withClient(
          timeoutMs,
          async (client, timeout) => (await client.callTool({ name: tool, ...(args && { arguments: args }) }, undefined, { timeout })) as CallToolResult,
        ),
      );
    },
    async close() {
      const current = connected;
      connected = undefined;
      await current?.then((client) => client.close()).catch(() => {});
    },
  };
}
