import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import test from 'ava';
import { ConfigError } from '../../reference-server/config-error.js';
import { loadConfigWithModules } from '../../reference-server/config.js';
import { createKey, ROOT, startServer, tempDataDir } from '../helpers/server-process.js';

// A provider kind from outside lib/ (examples/cohere-provider, compiled), named in the config file
// by the module that defines it: the CLI and the server import it before reading the providers.
const COHERE_MODULE = join(ROOT, 'dist/examples/cohere-provider/index.js');

test('a reference server serves a model through a provider kind of a module its config file names', async (t) => {
  const seen: Array<{ path: string; headers: IncomingHttpHeaders; body: Record<string, unknown> }> = [];
  const upstream = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> });
      const answer = { id: 'c1', finish_reason: 'COMPLETE', message: { role: 'assistant', content: [{ type: 'text', text: 'Hello from Cohere' }] }, usage: { tokens: { input_tokens: 4, output_tokens: 3 } } };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  t.teardown(() => new Promise<void>((resolve) => upstream.close(() => resolve())));
  const temp = await tempDataDir();
  t.teardown(() => temp.remove());

  const config = join(temp.dir, 'gateway.json');
  await writeFile(
    config,
    JSON.stringify({
      providerModules: [COHERE_MODULE],
      providers: [{ id: 'cohere', kind: 'cohere', baseURL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, apiKeyEnv: 'COHERE_KEY' }],
      models: [{ id: 'command', provider: 'cohere', upstreamModel: 'command-a-03-2025' }],
      sweep: { intervalSeconds: 0 },
    }),
  );
  const env = { DATA_DIR: join(temp.dir, 'data'), GATEWAY_CONFIG: config, COHERE_KEY: 'co-secret' };
  const { key } = await createKey(env, ['--account', 'acme']);
  const server = await startServer(env);
  t.teardown(() => server.stop());

  const answer = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'command', messages: [{ role: 'user', content: 'Hello' }] }),
  });
  t.is(answer.status, 200);
  t.like(await answer.json(), { object: 'chat.completion', model: 'command', choices: [{ message: { content: 'Hello from Cohere' } }], usage: { total_tokens: 7 } });
  t.is(seen.length, 1);
  t.like(seen[0], { path: '/v2/chat', headers: { authorization: 'Bearer co-secret' }, body: { model: 'command-a-03-2025' } });
});

test("the module's kind's options are checked as a built-in kind's are, with one line naming the setting", async (t) => {
  const temp = await tempDataDir();
  t.teardown(() => temp.remove());
  const config = join(temp.dir, 'gateway.json');
  await writeFile(config, JSON.stringify({ providerModules: [COHERE_MODULE], providers: [{ id: 'cohere', kind: 'cohere', baseUrl: 'http://x' }] }));
  await t.throwsAsync(loadConfigWithModules({ GATEWAY_CONFIG: config }), {
    instanceOf: ConfigError,
    message: `GATEWAY_CONFIG (${config}): providers[0].baseUrl is not a setting (expected id, baseURL, kind, apiKeyEnv)`,
  });
});

test('a module that cannot be imported, exports no providerKinds, or redefines a kind is refused by name', async (t) => {
  const temp = await tempDataDir();
  t.teardown(() => temp.remove());
  const config = join(temp.dir, 'gateway.json');
  await writeFile(join(temp.dir, 'clash.mjs'), 'export const providerKinds = { openai: { options: { safeParse() {}, shape: {} }, create() {} } };\n');
  await writeFile(join(temp.dir, 'nothing.mjs'), 'export const other = 1;\n');
  const cases: Array<[string, string]> = [
    ['./missing.mjs', "providerModules: cannot import './missing.mjs' (ERR_MODULE_NOT_FOUND)"],
    ['./nothing.mjs', "providerModules: './nothing.mjs' must export providerKinds, an object of { options, create } by kind"],
    ['./clash.mjs', "providerModules: './clash.mjs' defines the provider kind 'openai', which is already defined"],
  ];
  for (const [module, message] of cases) {
    await writeFile(config, JSON.stringify({ providerModules: [module] }));
    await t.throwsAsync(loadConfigWithModules({ GATEWAY_CONFIG: config }), { instanceOf: ConfigError, message }, module);
  }
});
