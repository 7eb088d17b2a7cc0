import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import test from 'ava';
import Koa from 'koa';
import { apiKey } from '../../lib/auth/api-key.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { SCOPES, type Scope } from '../../lib/auth/scopes.js';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import type { McpCallRecord } from '../../lib/mcp/call-store.js';
import { MemoryMcpCallStore } from '../../lib/stores/memory/mcp-call-store.js';
import { clientCredentials } from '../../lib/mcp/client-credentials.js';
import { cachedMcpGrants } from '../../lib/mcp/grant-store.js';
import { MemoryMcpGrantStore } from '../../lib/stores/memory/mcp-grant-store.js';
import { mcpGateway } from '../../lib/mcp/mcp-gateway.js';
import { httpMcpUpstream, type McpUpstream } from '../../lib/mcp/upstream.js';
import { createGatewayMetrics } from '../../lib/metrics/gateway-metrics.js';
import { MemoryModelLimiter } from '../../lib/stores/memory/model-limiter.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { traceRequests } from '../../lib/tracing/trace-requests.js';
import { underPath } from '../../lib/under-path.js';
import { KnexMcpCallStore } from '../../lib/stores/knex/mcp-call-store.js';
import { KnexMcpGrantStore } from '../../lib/stores/knex/mcp-grant-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { mcpCallStoreContract, mcpGrantStoreContract } from '../../lib/testing/mcp-store-contract.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';
import { listen } from '../helpers/http.js';
import { echoTool, failingTool, hangingTool, mockMcpServer, refusingTool } from '../helpers/mcp-servers.js';
import { parseMetrics, value } from '../helpers/prometheus.js';

// Whatever the file starts, it closes (hooks and tests are declared together, after the awaits).
const closers: Array<() => Promise<void>> = [];

const exporter = new InMemorySpanExporter();
new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).register();

const github = await mockMcpServer({ tools: { search: echoTool, issues: failingTool, strict: refusingTool } });
const search = await mockMcpServer({ tools: { web: echoTool } });
const slow = await mockMcpServer({ tools: { wait: hangingTool }, hangingList: true });
const crm = await mockMcpServer({ tools: { lookup: echoTool }, oauth: { clientId: 'gateway', clientSecret: 's3cret' } });
const locked = await mockMcpServer({ tools: { open: echoTool }, oauth: { clientId: 'gateway', clientSecret: 's3cret' } });
// A server that is down: a port that was listening and is closed.
const gone = await mockMcpServer({ tools: { nothing: echoTool } });
await gone.close();
closers.push(...[github, search, slow, crm, locked].map((server) => server.close));

const keys = new MemoryKeyStore();
const grants = new MemoryMcpGrantStore();
const calls = new MemoryMcpCallStore();
const records: McpCallRecord[] = [];
const metrics = createGatewayMetrics();
const upstreamErrors: string[] = [];
const app = new Koa();
app.use(traceRequests());
app.use(gatewayErrors());
app.use(underPath('/mcp', apiKey({ store: keys })));
const mcp = mcpGateway({
  upstreams: [
    httpMcpUpstream({ id: 'github', url: github.mcpUrl, headers: { 'x-team': 'platform' } }),
    httpMcpUpstream({ id: 'search', url: search.mcpUrl }),
    httpMcpUpstream({ id: 'gone', url: gone.mcpUrl }),
    httpMcpUpstream({ id: 'crm', url: crm.mcpUrl, authorization: clientCredentials({ tokenUrl: crm.tokenUrl, clientId: 'gateway', clientSecret: 's3cret' }) }),
    // No credentials: the server answers 401 with a WWW-Authenticate challenge.
    httpMcpUpstream({ id: 'locked', url: locked.mcpUrl }),
    // Wrong credentials: the token endpoint refuses them.
    httpMcpUpstream({
      id: 'badcreds',
      url: locked.mcpUrl,
      authorization: clientCredentials({ tokenUrl: locked.tokenUrl, clientId: 'gateway', clientSecret: 'wrong' }),
    }),
  ],
  accountGrants: grants,
  // Bounds no answer of a loopback server reaches, however busy the machine: nothing here times out.
  listTimeoutMs: 20_000,
  callTimeoutMs: 20_000,
  bodyLimit: 4096,
  limiter: new MemoryModelLimiter(),
  onCall: (record) => {
    records.push(record);
    void calls.insert([record]);
  },
  metrics,
  onUpstreamError: (server) => void upstreamErrors.push(server),
});
app.use(mcp.routes()).use(mcp.allowedMethods());
const gateway = await listen(app);
closers.push(gateway.close);

// A gateway of short bounds, for the server that never answers: the one that does is in process,
// so that it answers within them whatever the machine's load (no test races a timer).
const BOUND_MS = 500;
const inProcess: McpUpstream = {
  id: 'local',
  listTools: async () => [{ name: 'clock', inputSchema: { type: 'object' } }],
  callTool: async () => ({ content: [{ type: 'text', text: 'noon' }] }),
};
const bounded = mcpGateway({
  upstreams: [inProcess, httpMcpUpstream({ id: 'slow', url: slow.mcpUrl }), httpMcpUpstream({ id: 'gone', url: gone.mcpUrl })],
  accountGrants: grants,
  listTimeoutMs: BOUND_MS,
  callTimeoutMs: BOUND_MS,
  onCall: (record) => void records.push(record),
  onUpstreamError: (server) => void upstreamErrors.push(server),
});
const boundedApp = new Koa();
boundedApp.use(gatewayErrors());
boundedApp.use(underPath('/mcp', apiKey({ store: keys })));
boundedApp.use(bounded.routes());
const boundedGateway = await listen(boundedApp);
closers.push(boundedGateway.close);
await grants.set('acme', ['github/*', 'search/*', 'crm/*', 'slow/*', 'gone/*', 'locked/*', 'badcreds/*', 'local/*']);

async function keyFor(mcpTools: string[], { scopes = [...SCOPES] as Scope[], requestsPerMinute }: { scopes?: Scope[]; requestsPerMinute?: number } = {}) {
  const { key, record } = await createApiKey(keys, {
    prefix: 'kmg',
    account: 'acme',
    scopes,
    mcpTools,
    ...(requestsPerMinute !== undefined && { limits: { requestsPerMinute } }),
  });
  return { key, id: record.id };
}

/** The official SDK's client, connected to the gateway (or `url`) with `key`. */
async function clientWith(key: string, url = gateway.url): Promise<Client> {
  const client = new Client({ name: 'test', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

test.after.always(() => Promise.all(closers.map((close) => close())));

const toolNames = async (client: Client) => (await client.listTools()).tools.map((tool) => tool.name).sort();

test.serial('a key allowed one glob lists and calls only those tools; the others are absent and refused, never sent upstream', async (t) => {
  const { key, id } = await keyFor(['github/*']);
  const client = await clientWith(key);
  t.deepEqual(await toolNames(client), ['github__issues', 'github__search', 'github__strict']);
  const answer = await client.callTool({ name: 'github__search', arguments: { q: 'koa' } });
  t.deepEqual(answer.content, [{ type: 'text', text: '{"q":"koa"}' }]);
  const searchCalls = search.received.length;
  for (const name of ['search__web', 'nosuch__tool', 'github', 'crm__lookup']) {
    const refusal = await t.throwsAsync(client.callTool({ name, arguments: {} }), { instanceOf: McpError });
    t.is(refusal.code, ErrorCode.InvalidParams, name);
  }
  t.is(search.received.length, searchCalls, 'nothing went to the search server');
  // The client's key never goes upstream; the server's own headers do.
  t.true(github.received.every((headers) => !JSON.stringify(headers).includes(key)));
  t.true(github.received.every((headers) => headers['x-team'] === 'platform'));
  t.like(
    records.find((record) => record.keyId === id && record.outcome === 'ok'),
    { account: 'acme', server: 'github', tool: 'search', requestBytes: 11 },
  );
  t.is(records.filter((record) => record.keyId === id && record.outcome === 'denied').length, 4);
  await client.close();
});

test.serial("the key's grant is the intersection with its account's, and a revoked account grant is refused at the next call", async (t) => {
  await grants.set('other', ['search/*']);
  const { key: both } = await createApiKey(keys, { prefix: 'kmg', account: 'other', scopes: [...SCOPES], mcpTools: ['github/*', 'search/web'] });
  const client = await clientWith(both);
  t.deepEqual(await toolNames(client), ['search__web']);
  t.truthy(await client.callTool({ name: 'search__web', arguments: {} }));
  await grants.set('other', []);
  await t.throwsAsync(client.callTool({ name: 'search__web', arguments: {} }), { instanceOf: McpError });
  t.deepEqual(await toolNames(client), []);
  await client.close();
});

// The tests that wait out a bound run together, after the serial ones.
test('a server down or slower than the bound is left out of the list, and the others answer', async (t) => {
  const { key } = await keyFor(['*/*']);
  const client = await clientWith(key, boundedGateway.url);
  t.deepEqual(await toolNames(client), ['local__clock']);
  t.true(['gone', 'slow'].every((server) => upstreamErrors.includes(server)));
  await client.close();
});

test('a call past its timeout is an MCP error naming the server, and the server stays for the next', async (t) => {
  const { key, id } = await keyFor(['*/*']);
  const client = await clientWith(key, boundedGateway.url);
  const timeout = await t.throwsAsync(client.callTool({ name: 'slow__wait', arguments: {} }), { instanceOf: McpError });
  t.is(timeout.code, ErrorCode.RequestTimeout);
  t.regex(timeout.message, /'slow' did not answer within 500 ms/);
  t.like(timeout.data, { server: 'slow', reason: 'timeout' });
  t.deepEqual((await client.callTool({ name: 'local__clock', arguments: {} })).content, [{ type: 'text', text: 'noon' }]);
  t.deepEqual(
    records.filter((record) => record.keyId === id).map((record) => [record.server, record.outcome]),
    [
      ['slow', 'timeout'],
      ['local', 'ok'],
    ],
  );
  await client.close();
});

test.serial('a server down, or refusing the gateway its authorization, is an MCP error naming the server; nothing of it leaks', async (t) => {
  const { key, id } = await keyFor(['*/*']);
  const client = await clientWith(key);
  t.deepEqual(await toolNames(client), ['crm__lookup', 'github__issues', 'github__search', 'github__strict', 'search__web']);
  t.true(['gone', 'locked', 'badcreds'].every((server) => upstreamErrors.includes(server)));
  const down = await t.throwsAsync(client.callTool({ name: 'gone__nothing', arguments: {} }), { instanceOf: McpError });
  t.is(down.code, ErrorCode.InternalError);
  t.regex(down.message, /'gone'/);
  t.notRegex(down.message, /127\.0\.0\.1/);
  for (const server of ['locked', 'badcreds']) {
    const unauthorized = await t.throwsAsync(client.callTool({ name: `${server}__open`, arguments: {} }), { instanceOf: McpError });
    t.regex(unauthorized.message, new RegExp(`'${server}'`));
    t.like(unauthorized.data, { server, reason: 'unauthorized' });
  }
  t.deepEqual(
    records.filter((record) => record.keyId === id).map((record) => [record.server, record.outcome]),
    [
      ['gone', 'upstream_error'],
      ['locked', 'unauthorized'],
      ['badcreds', 'unauthorized'],
    ],
  );
  await client.close();
});

test.serial("an upstream's MCP errors and tool failures come back as they are", async (t) => {
  const { key } = await keyFor(['github/*']);
  const client = await clientWith(key);
  const refused = await t.throwsAsync(client.callTool({ name: 'github__strict', arguments: {} }), { instanceOf: McpError });
  t.is(refused.code, ErrorCode.InvalidParams);
  t.regex(refused.message, /query is required/);
  const failed = await client.callTool({ name: 'github__issues', arguments: {} });
  t.true(failed.isError);
  t.deepEqual(
    records.slice(-2).map((record) => record.outcome),
    ['upstream_error', 'tool_error'],
  );
  await client.close();
});

test.serial('OAuth client credentials: a token from the token endpoint, fetched once and reused, never the client key', async (t) => {
  const { key } = await keyFor(['crm/*']);
  const client = await clientWith(key);
  const answer = await client.callTool({ name: 'crm__lookup', arguments: { id: 7 } });
  t.deepEqual(answer.content, [{ type: 'text', text: '{"id":7}' }]);
  await client.callTool({ name: 'crm__lookup', arguments: { id: 8 } });
  t.is(crm.tokensIssued, 1);
  t.true(crm.received.every((headers) => !JSON.stringify(headers).includes(key)));
  await client.close();
});

test.serial("tools/call counts against the key's request limits: 429 with retry-after, nothing sent upstream", async (t) => {
  const { key } = await keyFor(['search/*'], { requestsPerMinute: 1 });
  const client = await clientWith(key);
  await client.callTool({ name: 'search__web', arguments: {} });
  const before = search.received.length;
  const refusal = await t.throwsAsync(client.callTool({ name: 'search__web', arguments: {} }), { instanceOf: StreamableHTTPError });
  t.is(refusal.code, 429);
  const raw = await fetch(`${gateway.url}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'search__web', arguments: {} } }),
  });
  t.is(raw.status, 429);
  t.regex(raw.headers.get('retry-after') ?? '', /^\d+$/);
  t.is(search.received.length, before);
  // Listing is not a call: it still answers.
  t.deepEqual(await toolNames(client), ['search__web']);
  await client.close();
});

test.serial('HTTP refusals: no key 401, no mcp:call 403, GET and DELETE 405, an oversized body 413, bad JSON 400', async (t) => {
  const post = (headers: Record<string, string>, body: string) =>
    fetch(`${gateway.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body,
    });
  const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
  t.is((await post({}, ping)).status, 401);
  const { key: noScope } = await keyFor(['*/*'], { scopes: ['chat:completions'] });
  t.is((await post({ authorization: `Bearer ${noScope}` }, ping)).status, 403);
  const { key } = await keyFor(['*/*']);
  const auth = { authorization: `Bearer ${key}` };
  for (const method of ['GET', 'DELETE']) {
    const answer = await fetch(`${gateway.url}/mcp`, { method, headers: auth });
    t.is(answer.status, 405);
    t.is(answer.headers.get('allow'), 'POST');
  }
  const large = await post(
    auth,
    JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'search__web', arguments: { q: 'x'.repeat(5000) } } }),
  );
  t.is(large.status, 413);
  t.like(await large.json(), { error: { code: 'request_too_large' } });
  t.is((await post(auth, '{')).status, 400);
});

test.serial('usage, metrics and an execute_tool span per call, whose trace context goes upstream', async (t) => {
  const { key, id } = await keyFor(['search/*']);
  const client = await clientWith(key);
  exporter.reset();
  await client.callTool({ name: 'search__web', arguments: { q: 'a' } });
  await t.throwsAsync(client.callTool({ name: 'github__search', arguments: {} }));
  t.like(await calls.summarize({ keyId: id }, 'tool'), [
    { group: 'github/search', calls: 1, failed: 1 },
    { group: 'search/web', calls: 1, failed: 0 },
  ]);
  const samples = parseMetrics(await metrics.registry.metrics());
  t.true((value(samples, 'kmg_mcp_calls_total', { server: 'search', tool: 'web', outcome: 'ok' }) ?? 0) >= 1);
  t.true((value(samples, 'kmg_mcp_calls_total', { server: 'github', tool: 'search', outcome: 'denied' }) ?? 0) >= 1);
  t.true((value(samples, 'kmg_mcp_calls_total', { server: '_unknown', tool: '_other', outcome: 'denied' }) ?? 0) >= 1);
  const spans = exporter.getFinishedSpans().filter((span) => span.attributes['gen_ai.operation.name'] === 'execute_tool');
  t.deepEqual(
    spans.map((span) => [span.name, span.attributes['gen_ai.tool.name'], span.attributes['error.type']]),
    [
      ['execute_tool web', 'web', undefined],
      ['execute_tool search', 'search', 'denied'],
    ],
  );
  // The server hears the call as a child of its span.
  const { traceId, spanId } = spans[0]?.spanContext() ?? {};
  t.is(search.received.at(-1)?.traceparent, `00-${traceId}-${spanId}-01`);
  const server = exporter.getFinishedSpans().find((span) => span.spanContext().spanId === spans[0]?.parentSpanContext?.spanId);
  t.is(server?.attributes['url.path'], '/mcp');
  await client.close();
});

test('the upstream and the grant rule are pluggable: an upstream of its own shape, an access rule of the caller', async (t) => {
  const local: McpUpstream = {
    id: 'local',
    listTools: async () => [
      { name: 'clock', inputSchema: { type: 'object' } },
      { name: 'secret', inputSchema: { type: 'object' } },
    ],
    callTool: async (tool) => ({ content: [{ type: 'text', text: `called ${tool}` }] }),
  };
  const custom = new Koa();
  custom.use(gatewayErrors());
  custom.use(underPath('/mcp', apiKey({ store: keys })));
  // Whatever the key's own grant: this rule allows the clock only.
  custom.use(mcpGateway({ upstreams: [local], access: async () => ({ tool: (_server, tool) => tool === 'clock', server: () => true }) }).routes());
  const served = await listen(custom);
  t.teardown(served.close);
  const { key } = await keyFor([]);
  const client = new Client({ name: 'test', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${served.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  t.deepEqual(await toolNames(client), ['local__clock']);
  t.deepEqual((await client.callTool({ name: 'local__clock', arguments: {} })).content, [{ type: 'text', text: 'called clock' }]);
  await t.throwsAsync(client.callTool({ name: 'local__secret', arguments: {} }), { instanceOf: McpError });
  await client.close();
});

test('a server id that could collide, or two servers of one id, are refused at start', (t) => {
  const upstream = (id: string): McpUpstream => ({ id, listTools: async () => [], callTool: async () => ({ content: [] }) });
  for (const id of ['git__hub', 'git_hub', '', '-x']) {
    t.throws(() => mcpGateway({ upstreams: [upstream(id)], accountGrants: grants }), { instanceOf: TypeError, message: /server id/ });
  }
  t.throws(() => mcpGateway({ upstreams: [upstream('a'), upstream('a')], accountGrants: grants }), {
    instanceOf: TypeError,
    message: /two servers have the id 'a'/,
  });
  t.throws(() => mcpGateway({ upstreams: [upstream('a')] }), { instanceOf: TypeError, message: /accountGrants/ });
});

test('client credentials: the token is kept until 30 s before it expires, then fetched again; wrong credentials are refused', async (t) => {
  const server = await mockMcpServer({ tools: {}, oauth: { clientId: 'gateway', clientSecret: 's3cret' } });
  t.teardown(server.close);
  let now = 0;
  const authorization = clientCredentials({ tokenUrl: server.tokenUrl, clientId: 'gateway', clientSecret: 's3cret', nowMs: () => now });
  const first = await authorization();
  t.regex(first.authorization ?? '', /^Bearer token-/);
  // The mock's tokens live 3600 s.
  now = 3_569_999;
  t.deepEqual(await authorization(), first);
  t.is(server.tokensIssued, 1);
  now = 3_570_000;
  await authorization();
  t.is(server.tokensIssued, 2);
  const refused = clientCredentials({ tokenUrl: server.tokenUrl, clientId: 'gateway', clientSecret: 'wrong', nowMs: () => now });
  await t.throwsAsync(refused());
});

// The stores of the grants and the tool calls, on every implementation.

const databases: TestDatabase[] = [];
closers.push(async () => void (await Promise.all(databases.map((database) => database.destroy()))));

const migrated = async (open: () => Promise<TestDatabase>) => {
  const database = await open();
  databases.push(database);
  await migrate(database.knex);
  return database.knex;
};

mcpGrantStoreContract(test, 'memory', async () => new MemoryMcpGrantStore());
mcpGrantStoreContract(test, 'sqlite', async () => new KnexMcpGrantStore(await migrated(sqliteDatabase)));
mcpGrantStoreContract(withPostgres(test), 'postgres', async () => new KnexMcpGrantStore(await migrated(postgresDatabase)));
mcpCallStoreContract(test, 'memory', async () => new MemoryMcpCallStore());
mcpCallStoreContract(test, 'sqlite', async () => new KnexMcpCallStore(await migrated(sqliteDatabase)));
mcpCallStoreContract(withPostgres(test), 'postgres', async () => new KnexMcpCallStore(await migrated(postgresDatabase)));

test("cachedMcpGrants() reads an account's grant at most once per ttl, and again after it", async (t) => {
  const store = new MemoryMcpGrantStore();
  let now = 0;
  let reads = 0;
  const counted = { get: (account: string) => ((reads += 1), store.get(account)) };
  const cached = cachedMcpGrants(counted, { ttlMs: 1000, nowMs: () => now });
  await store.set('acme', ['github/*']);
  t.deepEqual(await cached.get('acme'), ['github/*']);
  await store.set('acme', []);
  t.deepEqual(await cached.get('acme'), ['github/*']);
  now = 1000;
  t.deepEqual(await cached.get('acme'), []);
  t.is(reads, 2);
});
