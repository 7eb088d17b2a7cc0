import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import test from 'ava';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { SCOPES } from '../../lib/auth/scopes.js';
import { echoTool, mockMcpServer } from '../helpers/mcp-servers.js';
import { until } from '../helpers/poll.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';
import { referenceApp, type ReferenceApp } from '../helpers/reference-app.js';
import { createApp } from '../../reference-server/app.js';
import { listen, type Listening } from '../helpers/http.js';
import { pino } from 'pino';

// The reference server's /mcp on each deployment, two instances on one database behind a client
// whose requests alternate between them: no session is pinned to either.

const github = await mockMcpServer({ tools: { search: echoTool, issues: echoTool } });
const search = await mockMcpServer({ tools: { web: echoTool } });
const SEARCH_TOKEN = 'search-upstream-secret';
const gatewayConfig = {
  mcpServers: [
    { id: 'github', url: github.mcpUrl, headers: { 'x-team': 'platform' } },
    { id: 'search', url: search.mcpUrl, auth: { type: 'header', valueEnv: 'SEARCH_TOKEN', header: 'authorization' } },
  ],
  mcp: { listTimeoutMs: 5000, callTimeoutMs: 5000 },
};

test.after.always(() => Promise.all([github.close(), search.close()]));

/** The SDK's client with `key`, its requests sent to `urls` in turn. */
async function alternatingClient(urls: string[], key: string): Promise<{ client: Client; sent: string[] }> {
  const sent: string[] = [];
  let next = 0;
  const client = new Client({ name: 'test', version: '1' });
  const transport = new StreamableHTTPClientTransport(new URL(`${urls[0]}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
    fetch: (url, init) => {
      const base = urls[next++ % urls.length] as string;
      sent.push(base);
      return fetch(`${base}/mcp`, init);
    },
  });
  await client.connect(transport);
  return { client, sent };
}

/**
 * Two apps of the reference server on one deployment's database and Redis: each with its own
 * upstream connections, grant cache and limiter, as two processes have (one deployment opened, to
 * keep the suite quick).
 */
async function twoInstances(env: Record<string, string>): Promise<[ReferenceApp, Listening]> {
  const a = await referenceApp(gatewayConfig, { ...env, SEARCH_TOKEN });
  const b = await listen(createApp(a.deployment, pino({ level: 'silent' })));
  return [a, b];
}

function deploymentTest(name: string, anyTest: typeof test, open: () => Promise<{ env: Record<string, string>; cleanup(): Promise<void> }>) {
  anyTest(
    `${name}: two instances serve one client; a key allowed one glob sees and calls only its tools; grants set by the admin API; usage reported`,
    async (t) => {
      const { env, cleanup } = await open();
      const [a, b] = await twoInstances(env);
      t.teardown(async () => {
        await b.close();
        await a.close();
        await cleanup();
      });
      const account = `mcp-${Math.random().toString(36).slice(2)}`;
      const { token } = await createAdminToken(a.deployment.adminTokens, { prefix: a.config.gateway.keyPrefix });
      const admin = (method: string, path: string, body?: unknown) =>
        fetch(`${a.url}/admin/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });

      const grant = await admin('PUT', `/accounts/${account}/mcp_tools`, { mcp_tools: ['github/*', 'search/*'] });
      t.is(grant.status, 200);
      t.deepEqual(await grant.json(), { object: 'account_mcp_tools', account, mcp_tools: ['github/*', 'search/*'] });
      t.is((await admin('PUT', `/accounts/${account}/mcp_tools`, { mcp_tools: ['github'] })).status, 400);
      const created = await admin('POST', '/keys', { account, mcp_tools: ['github/*'] });
      const key = (await created.json()) as { key: string; id: string; mcp_tools: string[] };
      t.deepEqual(key.mcp_tools, ['github/*']);

      const { client, sent } = await alternatingClient([a.url, b.url], key.key);
      t.deepEqual((await client.listTools()).tools.map((tool) => tool.name).sort(), ['github__issues', 'github__search']);
      t.deepEqual((await client.callTool({ name: 'github__search', arguments: { q: 'x' } })).content, [{ type: 'text', text: '{"q":"x"}' }]);
      const refused = await t.throwsAsync(client.callTool({ name: 'search__web', arguments: {} }), { instanceOf: McpError });
      t.is(refused.code, ErrorCode.InvalidParams);
      t.true(sent.includes(a.url) && sent.includes(b.url), 'both instances answered');

      // The other key reaches search with the server's own credential, never the client's key.
      const { key: searchKey } = await createApiKey(a.deployment.keys, {
        prefix: a.config.gateway.keyPrefix,
        account,
        scopes: [...SCOPES],
        mcpTools: ['search/web'],
      });
      const other = await alternatingClient([b.url, a.url], searchKey);
      await other.client.callTool({ name: 'search__web', arguments: {} });
      t.true(search.received.some((headers) => headers.authorization === SEARCH_TOKEN));
      t.false(search.received.some((headers) => JSON.stringify(headers).includes(searchKey)));

      // Usage, read through the admin API of either instance.
      const usage = await until(
        async () =>
          (await (await admin('GET', `/mcp/usage?account=${account}&by=tool`)).json()) as { data: Array<{ group: string; calls: number; failed: number }> },
        (body) => body.data.reduce((sum, row) => sum + row.calls, 0) >= 3,
      );
      t.like(usage.data, [
        { group: 'github/search', calls: 1, failed: 0 },
        { group: 'search/web', calls: 2, failed: 1 },
      ]);

      // The account's grant withdrawn on one instance: the other refuses within a second.
      t.is((await admin('PUT', `/accounts/${account}/mcp_tools`, { mcp_tools: [] })).status, 200);
      const refusedAfter = await until(
        () =>
          other.client.callTool({ name: 'search__web', arguments: {} }).then(
            () => null,
            (err: unknown) => err,
          ),
        (err) => err instanceof McpError,
        { intervalMs: 100, attempts: 30 },
      );
      t.true(refusedAfter instanceof McpError);
      await Promise.all([client.close(), other.client.close()]);
    },
  );
}

deploymentTest('sqlite', test, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-mcp-'));
  return { env: { DATABASE_URL: `sqlite:${join(dir, 'gateway.sqlite')}` }, cleanup: () => rm(dir, { recursive: true, force: true }) };
});

deploymentTest('postgres + redis', withRedis(withPostgres(test)), async () => {
  const db = await throwawayPostgres();
  return { env: { DATABASE_URL: db.url, REDIS_URL }, cleanup: db.drop };
});
