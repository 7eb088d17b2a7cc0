import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import test from 'ava';
import { createKey, runCli, startServer, tempDataDir } from '../helpers/server-process.js';

const dirs: Array<{ remove(): Promise<void> }> = [];
test.after.always(() => Promise.all(dirs.map((dir) => dir.remove())));

async function dataDir() {
  const temp = await tempDataDir();
  dirs.push(temp);
  return temp.dir;
}

async function configFile(dir: string, content: unknown) {
  const path = join(dir, 'gateway.json');
  await writeFile(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

// Each case: the environment (given the data dir) and what the one line must say. The config's
// own rules are test/server/config.test.ts's; these are the ways `serve` meets them.
const badConfigs: Array<[string, (dir: string) => Promise<Record<string, string>>, RegExp]> = [
  ['a limit that is not a positive integer', async (dir) => ({ GATEWAY_CONFIG: await configFile(dir, { limits: { maxFiles: -1 } }) }), /^koa-model-gateway: GATEWAY_CONFIG \(.*gateway\.json\): limits\.maxFiles must be a positive integer\n$/],
  ['a DATABASE_URL of an unsupported kind', async () => ({ DATABASE_URL: 'mysql://root:secret@db/x' }), /DATABASE_URL must start with postgres:\/\/, postgresql:\/\/ or sqlite:, got 'mysql:'/],
  ['a PostgreSQL server that does not answer', async () => ({ DATABASE_URL: 'postgres://u:secret@127.0.0.1:1/x' }), /cannot open the database at postgres:\/\/127\.0\.0\.1:1\/x/],
  ['a Redis that does not answer', async () => ({ REDIS_URL: 'redis://:secret@127.0.0.1:1' }), /cannot reach Redis at 127\.0\.0\.1:1/],
  [
    'a provider credential variable that is not set',
    async (dir) => ({
      GATEWAY_CONFIG: await configFile(dir, { providers: [{ id: 'openai', kind: 'openai', apiKeyEnv: 'KMG_TEST_UNSET_KEY' }], models: [] }),
    }),
    /provider 'openai': the environment variable KMG_TEST_UNSET_KEY \(its apiKeyEnv\) is not set/,
  ],
];

for (const [name, makeEnv, line] of badConfigs) {
  test(`serve with ${name} exits non-zero with one clear line`, async (t) => {
    const dir = await dataDir();
    // The log goes to this process's stdout: only the one line on stderr is the CLI's answer.
    const result = await runCli(['serve'], { DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'silent', ...(await makeEnv(dir)) });
    t.is(result.code, 1);
    t.regex(result.stderr, /^koa-model-gateway: [^\n]+\n$/);
    t.regex(result.stderr, line);
    t.false(result.stderr.includes('secret'), 'no password in the message');
  });
}

// The API's port, and the metrics listener's, which opens after it: both close what they opened.
for (const [variable, line] of [
  ['PORT', (port: number) => `koa-model-gateway: cannot listen on 127.0.0.1:${port} (EADDRINUSE)\n`],
  ['METRICS_PORT', (port: number) => `koa-model-gateway: METRICS_PORT: cannot listen on 127.0.0.1:${port} (EADDRINUSE)\n`],
] as const) {
  test(`serve with ${variable} in use exits non-zero with one clear line`, async (t) => {
    const dir = await dataDir();
    const blocker = createServer();
    blocker.listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    const { port } = blocker.address() as AddressInfo;
    try {
      const result = await runCli(['serve'], { DATA_DIR: dir, PORT: '0', [variable]: String(port) });
      t.is(result.code, 1);
      t.is(result.stderr, line(port));
    } finally {
      blocker.close();
    }
  });
}

test('a provider credential is read from the variable apiKeyEnv names, and sent upstream', async (t) => {
  const dir = await dataDir();
  const received: Array<string | undefined> = [];
  const upstream = createHttpServer((req, res) => {
    received.push(req.headers.authorization);
    req.resume();
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'up', choices: [] }));
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  const { port } = upstream.address() as AddressInfo;
  const config = await configFile(dir, {
    providers: [{ id: 'openai', kind: 'openai', baseURL: `http://127.0.0.1:${port}/v1`, apiKeyEnv: 'KMG_TEST_OPENAI_KEY' }],
    models: [{ id: 'gpt', provider: 'openai', upstreamModel: 'gpt-4.1-mini', created: 1 }],
  });
  const env = { DATA_DIR: dir, GATEWAY_CONFIG: config, KMG_TEST_OPENAI_KEY: 'sk-upstream' };
  const { key } = await createKey(env, ['--account', 'a']);
  const server = await startServer(env);
  try {
    const headers = { authorization: `Bearer ${key}` };
    const models = await fetch(`${server.url}/v1/models`, { headers });
    t.deepEqual(await models.json(), { object: 'list', data: [{ id: 'gpt', object: 'model', created: 1, owned_by: 'openai' }] });
    const chat = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: 'hi' }] }),
    });
    t.is(chat.status, 200);
    t.deepEqual(received, ['Bearer sk-upstream']);
  } finally {
    await server.stop();
    upstream.close();
  }
});
