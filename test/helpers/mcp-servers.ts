import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { listen, type Listening } from './http.js';

/** A tool of a mock server: what it answers to its arguments. */
export type MockTool = (args: Record<string, unknown>) => CallToolResult | Promise<CallToolResult>;

export interface MockMcpServer extends Listening {
  /** The MCP endpoint. */
  mcpUrl: string;
  /** The token endpoint (with `oauth`). */
  tokenUrl: string;
  /** The headers of every MCP request the server received. */
  received: IncomingHttpHeaders[];
  /** Token requests the server answered (with `oauth`). */
  tokensIssued: number;
}

export interface MockMcpOptions {
  tools: Record<string, MockTool>;
  /** Client credentials the token endpoint takes; the MCP endpoint then wants its bearer token (401 otherwise). */
  oauth?: { clientId: string; clientSecret: string };
  /** `tools/list` never answers. */
  hangingList?: boolean;
}

const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] });

/** A tool that answers its arguments back, as text. */
export const echoTool: MockTool = (args) => text(JSON.stringify(args));

/** A tool that never answers. */
export const hangingTool: MockTool = () => new Promise(() => {});

/** A tool that fails as tools do: an answer with `isError`. */
export const failingTool: MockTool = () => ({ ...text('it broke'), isError: true });

/** A tool whose server answers an MCP error. */
export const refusingTool: MockTool = () => {
  throw new McpError(ErrorCode.InvalidParams, 'query is required');
};

async function readBody(req: IncomingMessage): Promise<string> {
  let body = '';
  for await (const chunk of req) body += String(chunk);
  return body;
}

/**
 * An MCP server built with the official SDK's server, stateless over Streamable HTTP, on a
 * loopback port: `POST /mcp`; with `oauth`, `POST /token` (client_credentials, client_secret_basic)
 * and the MCP endpoint behind its token.
 */
export async function mockMcpServer(options: MockMcpOptions): Promise<MockMcpServer> {
  const received: IncomingHttpHeaders[] = [];
  const token = `token-${Math.random().toString(36).slice(2)}`;
  const state = { tokensIssued: 0 };

  async function mcp(req: IncomingMessage, res: ServerResponse) {
    received.push(req.headers);
    if (options.oauth && req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"', 'content-type': 'application/json' }).end('{"error":"invalid_token"}');
      return;
    }
    const server = new Server({ name: 'mock', version: '1' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      ...(options.hangingList && (await hangingTool({}))),
      tools: Object.keys(options.tools).map((name) => ({ name, description: `the ${name} tool`, inputSchema: { type: 'object' as const } })),
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request) => {
      const tool = options.tools[request.params.name];
      if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
      return tool(request.params.arguments ?? {});
    });
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
    await server.connect(transport);
    res.on('close', () => void server.close());
    await transport.handleRequest(req, res, JSON.parse(await readBody(req)));
  }

  async function tokenEndpoint(req: IncomingMessage, res: ServerResponse) {
    const form = new URLSearchParams(await readBody(req));
    const basic = `Basic ${Buffer.from(`${options.oauth?.clientId}:${options.oauth?.clientSecret}`).toString('base64')}`;
    if (form.get('grant_type') !== 'client_credentials' || req.headers.authorization !== basic) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"invalid_client"}');
      return;
    }
    state.tokensIssued += 1;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: token, token_type: 'Bearer', expires_in: 3600 }));
  }

  const http = createServer((req, res) => {
    const handler = req.url === '/token' && options.oauth ? tokenEndpoint : req.url === '/mcp' && req.method === 'POST' ? mcp : undefined;
    if (!handler) return void res.writeHead(405).end();
    handler(req, res).catch(() => res.destroy());
  });
  const listening = await listen(http);
  return {
    ...listening,
    mcpUrl: `${listening.url}/mcp`,
    tokenUrl: `${listening.url}/token`,
    received,
    get tokensIssued() {
      return state.tokensIssued;
    },
  };
}
