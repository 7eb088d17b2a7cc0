import type { McpCallRecord, McpCallStore } from '../mcp/call-store.js';
import type { McpGrantStore } from '../mcp/grant-store.js';
import type { StoreContractTest } from './store-contract-test.js';

/** The behaviour every McpGrantStore must have; run once per implementation. */
export function mcpGrantStoreContract(test: StoreContractTest, name: string, makeStore: () => Promise<McpGrantStore>): void {
  test(`${name}: an account's MCP grant is set whole, kept without repeats, removed with []; an unknown account has none`, async (t) => {
    const store = await makeStore();
    t.deepEqual(await store.get('nobody'), []);
    t.deepEqual(await store.set('acme', ['github/*', 'search/web_search', 'github/*']), ['github/*', 'search/web_search']);
    t.deepEqual(await store.get('acme'), ['github/*', 'search/web_search']);
    t.deepEqual(await store.set('acme', ['crm/*']), ['crm/*']);
    t.deepEqual(await store.get('acme'), ['crm/*']);
    t.deepEqual(await store.get('ācme "quoted"'), []);
    t.deepEqual(await store.set('acme', []), []);
    t.deepEqual(await store.get('acme'), []);
  });
}

const call = (fields: Partial<McpCallRecord>): McpCallRecord => ({
  time: 1_900_000_000_000,
  requestId: 'req_1',
  keyId: 'key_a',
  account: 'acme',
  server: 'github',
  tool: 'search',
  outcome: 'ok',
  durationMs: 12.5,
  requestBytes: 10,
  responseBytes: 100,
  ...fields,
});

/** The behaviour every McpCallStore must have; run once per implementation. */
export function mcpCallStoreContract(test: StoreContractTest, name: string, makeStore: () => Promise<McpCallStore>): void {
  test(`${name}: tool calls are summed by server, tool and key, filtered by account, key and time`, async (t) => {
    const store = await makeStore();
    await store.insert([
      call({}),
      call({ tool: 'issues', outcome: 'timeout', durationMs: 2000, responseBytes: 0 }),
      call({ server: 'search', tool: 'web', keyId: 'key_b', time: 1_900_000_001_000 }),
      call({ account: 'other', keyId: 'key_c' }),
    ]);
    await store.insert([]);
    t.deepEqual(await store.summarize({ account: 'acme' }, 'server'), [
      { group: 'github', calls: 2, failed: 1, durationMs: 2012, requestBytes: 20, responseBytes: 100 },
      { group: 'search', calls: 1, failed: 0, durationMs: 12, requestBytes: 10, responseBytes: 100 },
    ]);
    t.deepEqual(
      (await store.summarize({ account: 'acme' }, 'tool')).map((row) => [row.group, row.calls]),
      [
        ['github/issues', 1],
        ['github/search', 1],
        ['search/web', 1],
      ],
    );
    t.deepEqual(
      (await store.summarize({}, 'key')).map((row) => [row.group, row.calls]),
      [
        ['key_a', 2],
        ['key_b', 1],
        ['key_c', 1],
      ],
    );
    t.deepEqual(
      (await store.summarize({ keyId: 'key_b' }, 'server')).map((row) => row.group),
      ['search'],
    );
    t.deepEqual(
      (await store.summarize({ since: 1_900_000_000_500 }, 'server')).map((row) => row.group),
      ['search'],
    );
  });
}
