import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { readdir, readlink, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, request, type IncomingMessage } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import test from 'ava';
import knexFactory from 'knex';
import { ConfigError } from '../../reference-server/config-error.js';
import { loadConfigWithModules } from '../../reference-server/config.js';
import { openDeployment } from '../../reference-server/deployment.js';
import { createLogger } from '../../reference-server/logger.js';
import { removeStaleUploads } from '../../reference-server/stale-uploads.js';
import { makePdf } from '../helpers/models-pdf.js';
import { uploadForm } from '../helpers/multipart.js';
import { until } from '../helpers/poll.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import {
  createKey,
  runCli,
  spawnCli,
  spawnServer,
  startServer,
  tempDataDir,
  uploadFiles,
  type CreatedKey,
  type RunningServer,
} from '../helpers/server-process.js';
import { tcpProxy } from '../helpers/server-tcp-proxy.js';
import { POSTGRES_URL, REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';

// The reference server's life: a start that fails (a bad setting, a port in use, an optional peer
// not installed), readiness while a service is away, shutdown on a signal, and the compiled CLI.

const cleanups: Array<() => Promise<unknown>> = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function dataDir() {
  const temp = await tempDataDir();
  cleanups.push(temp.remove);
  return temp.dir;
}

// Start-up: a start that fails says why in one line.

async function configFile(dir: string, content: unknown) {
  const path = join(dir, 'gateway.json');
  await writeFile(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

// Each case: the environment (given the data dir) and what the one line must say. The config's
// own rules are test/server/config.test.ts's; these are the ways `serve` meets them.
const badConfigs: Array<[string, (dir: string) => Promise<Record<string, string>>, RegExp]> = [
  [
    'a limit that is not a positive integer',
    async (dir) => ({ GATEWAY_CONFIG: await configFile(dir, { limits: { maxFiles: -1 } }) }),
    /^koa-model-gateway: GATEWAY_CONFIG \(.*gateway\.json\): limits\.maxFiles must be a positive integer\n$/,
  ],
  [
    'a DATABASE_URL of an unsupported kind',
    async () => ({ DATABASE_URL: 'mysql://root:secret@db/x' }),
    /DATABASE_URL must start with postgres:\/\/, postgresql:\/\/ or sqlite:, got 'mysql:'/,
  ],
  [
    'a PostgreSQL server that does not answer',
    async () => ({ DATABASE_URL: 'postgres://u:secret@127.0.0.1:1/x' }),
    /cannot open the database at postgres:\/\/127\.0\.0\.1:1\/x/,
  ],
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

test('serve with a PostgreSQL server that does not answer writes no log line of an outage: the one line is the answer', async (t) => {
  const result = await spawnCli(['serve'], { DATA_DIR: await dataDir(), PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: 'postgres://u:secret@127.0.0.1:1/x' });
  t.is(result.code, 1);
  t.regex(result.stderr, /^koa-model-gateway: cannot open the database at postgres:\/\/127\.0\.0\.1:1\/x[^\n]*\n$/);
  t.false(result.stdout.includes('store unavailable'), result.stdout);
});

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

// Optional peers: a setting that needs a package that is not installed.

/** node's arguments that make `packages` unresolvable in the CLI's process, as if not installed. */
const hiding = (packages: string[]) => ({
  nodeArgs: ['--import', new URL('../helpers/hide-packages.js', import.meta.url).href],
  env: { KMG_TEST_HIDDEN_PACKAGES: packages.join(',') },
});

// An endpoint nobody listens on: the start stops before any span could be sent.
const OTEL = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:18320' };

// Each case: what is not installed, the settings that ask for it, the one line.
const missingPeers: Array<[string, string[], Record<string, string>, string]> = [
  ['METRICS_PORT without prom-client', ['prom-client'], { METRICS_PORT: '0' }, 'METRICS_PORT needs prom-client, not installed: npm install prom-client'],
  ['REDIS_URL without ioredis', ['ioredis'], { REDIS_URL }, 'REDIS_URL needs ioredis, not installed: npm install ioredis'],
  [
    'BLOB_URL of a bucket without the AWS SDK',
    ['@aws-sdk/client-s3', '@aws-sdk/lib-storage'],
    { BLOB_URL: 's3://bucket/files', AWS_REGION: 'us-east-1' },
    'BLOB_URL (S3) needs @aws-sdk/client-s3, @aws-sdk/lib-storage, not installed: npm install @aws-sdk/client-s3 @aws-sdk/lib-storage',
  ],
  [
    'METRICS_PORT and tracing without prom-client and the tracing SDK',
    ['prom-client', '@opentelemetry/sdk-trace-node'],
    { METRICS_PORT: '0', ...OTEL },
    'METRICS_PORT needs prom-client; tracing (OTEL_EXPORTER_OTLP_ENDPOINT) needs @opentelemetry/sdk-trace-node, not installed: npm install prom-client @opentelemetry/sdk-trace-node',
  ],
];

for (const [name, packages, settings, line] of missingPeers) {
  // The process ends by itself (the CLI sets an exit code, it does not call exit): no handle is left open.
  test(`serve with ${name} exits non-zero with one clear line, having opened and created nothing`, async (t) => {
    const dir = await dataDir();
    const { nodeArgs, env } = hiding(packages);
    const result = await spawnCli(['serve'], { DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'silent', ...settings, ...env }, nodeArgs);
    t.is(result.code, 1);
    t.is(result.stderr, `koa-model-gateway: ${line}\n`);
    t.deepEqual(await readdir(dir), [], 'no database, files or uploads directory');
  });
}

test('serve with a bedrock provider without the AWS packages exits non-zero naming them, having created nothing', async (t) => {
  const dir = await dataDir();
  const config = await configFile(await dataDir(), {
    providers: [{ id: 'bedrock', kind: 'bedrock', region: 'us-east-1' }],
    models: [{ id: 'claude', provider: 'bedrock' }],
  });
  const { nodeArgs, env } = hiding(['@smithy/signature-v4', '@aws-sdk/credential-providers']);
  const result = await spawnCli(['serve'], { DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'silent', GATEWAY_CONFIG: config, ...env }, nodeArgs);
  t.is(result.code, 1);
  t.is(
    result.stderr,
    'koa-model-gateway: a provider of kind bedrock needs @smithy/signature-v4, @aws-sdk/credential-providers, not installed: npm install @smithy/signature-v4 @aws-sdk/credential-providers\n',
  );
  t.deepEqual(await readdir(dir), [], 'no database, files or uploads directory');
});

withRedis(test)(
  'a start that fails at its last step releases all it opened (Redis, its subscriber, the database, the uploads claim): the process ends by itself',
  async (t) => {
    const dir = await dataDir();
    // The metrics' module, loaded last, cannot be found: everything else is open by then.
    const { nodeArgs, env } = hiding(['koa-model-gateway/metrics']);
    const result = await spawnCli(['serve'], { DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'silent', METRICS_PORT: '0', REDIS_URL, ...env }, nodeArgs);
    t.is(result.code, 1);
    t.regex(result.stderr, /^koa-model-gateway: unexpected error: [^\n]*koa-model-gateway\/metrics[^\n]*\n$/);
    t.true(existsSync(join(dir, 'gateway.sqlite')), 'the database was opened');
    t.deepEqual(await readdir(join(dir, 'uploads')), [], 'the uploads claim is released');
  },
);

/** The files under `dir` that this process holds open (its worker threads' included). */
async function openFilesUnder(dir: string): Promise<string[]> {
  const targets = await Promise.all((await readdir('/proc/self/fd')).map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => '')));
  return targets.filter((target) => target.startsWith(`${dir}/`));
}

const silent = createLogger('silent', { write: () => undefined });

test('a start that fails after the database opened (Redis unreachable) leaves no SQLite file open', async (t) => {
  const dir = await dataDir();
  const config = await loadConfigWithModules({ DATA_DIR: dir, LOG_LEVEL: 'silent', REDIS_URL: 'redis://127.0.0.1:1' });
  await t.throwsAsync(openDeployment(config, silent), { instanceOf: ConfigError, message: /cannot reach Redis/ });
  t.true(existsSync(join(dir, 'gateway.sqlite')), 'the database was opened');
  t.deepEqual(await openFilesUnder(dir), []);
});

withPostgres(test)('a start that fails after the database opened (Redis unreachable) leaves no PostgreSQL connection open', async (t) => {
  const database = await throwawayPostgres({ ownDatabase: true });
  t.teardown(() => database.drop());
  const name = new URL(database.url).pathname.slice(1);
  const config = await loadConfigWithModules({ DATA_DIR: await dataDir(), LOG_LEVEL: 'silent', DATABASE_URL: database.url, REDIS_URL: 'redis://127.0.0.1:1' });
  await t.throwsAsync(openDeployment(config, silent), { instanceOf: ConfigError, message: /cannot reach Redis/ });
  const admin = knexFactory({ client: 'pg', connection: POSTGRES_URL });
  t.teardown(() => admin.destroy());
  const count = async () =>
    Number((await admin.raw<{ rows: Array<{ count: string }> }>('select count(*) from pg_stat_activity where datname = ?', [name])).rows[0]?.count);
  // The server ends a backend just after its client has gone: it may still be listed for a moment.
  t.is(await until(count, (connections) => connections === 0), 0);
});

// Readiness: /readyz while PostgreSQL or Redis is away.

const through = (url: string, proxy: { port: number }) => {
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(proxy.port);
  return proxied.toString();
};

// ioredis reconnects with a back-off of up to 2 s; allow far more.
const eventually = <T>(probe: () => Promise<T>, done: (value: T) => boolean) => until(probe, done, { intervalMs: 100, attempts: 150 });

withRedis(withPostgres(test))('/readyz and the API answer 503 while PostgreSQL or Redis is away, and recover', async (t) => {
  const database = await throwawayPostgres();
  cleanups.push(database.drop);
  const data = await tempDataDir();
  cleanups.push(data.remove);
  const postgres = await tcpProxy({ host: new URL(POSTGRES_URL).hostname, port: Number(new URL(POSTGRES_URL).port || 5432) });
  const redis = await tcpProxy({ host: new URL(REDIS_URL).hostname, port: Number(new URL(REDIS_URL).port || 6379) });
  cleanups.push(postgres.close, redis.close);
  const env = { DATA_DIR: data.dir, DATABASE_URL: through(database.url, postgres), REDIS_URL: through(REDIS_URL, redis) };
  const { key } = await createKey(env, ['--account', 'acme']);
  const server = await startServer(env);
  cleanups.push(() => server.stop());
  const headers = { authorization: `Bearer ${key}` };
  const ready = async () => {
    const response = await fetch(`${server.url}/readyz`);
    return { status: response.status, body: (await response.json()) as { checks: Record<string, string> } };
  };
  const uploadStatus = async () => {
    const form = new FormData();
    form.set('purpose', 'user_data');
    form.set('file', new Blob([makePdf(1)]), 'a.pdf');
    const response = await fetch(`${server.url}/v1/files`, { method: 'POST', headers, body: form });
    return { status: response.status, body: (await response.json()) as { error?: { code: string } } };
  };

  t.deepEqual(await ready(), { status: 200, body: { status: 'ok', checks: { database: 'ok', blobs: 'ok', redis: 'ok' } } as never });

  await redis.cut();
  t.deepEqual(await ready(), { status: 503, body: { status: 'unavailable', checks: { database: 'ok', blobs: 'ok', redis: 'unavailable' } } as never });
  const refused = await uploadStatus();
  t.is(refused.status, 503);
  t.is(refused.body.error?.code, 'service_unavailable');
  t.is((await fetch(`${server.url}/v1/files`, { headers })).status, 200, 'reads never touch Redis');
  await redis.restore();
  t.is((await eventually(ready, (value) => value.status === 200)).status, 200);
  t.is((await eventually(uploadStatus, (value) => value.status === 200)).status, 200);

  await postgres.cut();
  t.like(await ready(), { status: 503, body: { checks: { database: 'unavailable', redis: 'ok' } } });
  const down = await fetch(`${server.url}/v1/files`, { headers });
  t.is(down.status, 503);
  t.like(await down.json(), { error: { type: 'server_error', code: 'service_unavailable', message: 'Service temporarily unavailable' } });
  await postgres.restore();
  t.is((await eventually(ready, (value) => value.status === 200)).status, 200);
  t.is((await fetch(`${server.url}/v1/files`, { headers })).status, 200);
});

// Shutdown: the compiled server in a process of its own, stopped by a signal.

/** Polls `condition` every 25 ms; throws, naming `what`, after 10 s. */
async function waitFor(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  if (
    !(await until(
      async () => condition(),
      (met) => met,
      { intervalMs: 25, attempts: 400 },
    ))
  )
    throw new Error(`timed out waiting for ${what}`);
}

/**
 * An upload whose body is sent in two halves: the first half now, the second when the test says.
 * Resolves `response` with the status, headers and body text, or rejects when the connection is cut.
 */
function splitUpload(server: RunningServer, key: string, pdf: Buffer) {
  const boundary = `kmg${randomBytes(8).toString('hex')}`;
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n`),
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.pdf"\r\nContent-Type: application/pdf\r\n\r\n`),
    pdf,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  const half = Math.floor(body.length / 2);
  const req = request(`${server.url}/v1/files`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': `multipart/form-data; boundary=${boundary}`,
      'content-length': String(body.length),
    },
  });
  const response = new Promise<{ status: number; headers: IncomingMessage['headers']; text: string }>((resolve, reject) => {
    req.once('error', reject);
    req.once('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      res.once('error', reject);
    });
  });
  req.write(body.subarray(0, half));
  return { response, finish: () => req.end(body.subarray(half)) };
}

/** The compiled server on a fresh data dir, with one key made through the CLI. */
async function spawnedServerWithKey(env: Record<string, string> = {}) {
  const dir = await dataDir();
  const base = { DATA_DIR: dir, ...env };
  const { key } = await createKey(base, ['--account', 'acme']);
  return { env: base, key, server: await spawnServer(base), blobs: join(dir, 'files') };
}

test('SIGTERM during an upload: the upload finishes, new connections are refused, the process exits 0', async (t) => {
  const { env, key, server } = await spawnedServerWithKey();
  const pdf = makePdf(1, 256 * 1024);
  const upload = splitUpload(server, key, pdf);
  // The first half is being streamed to its temp file: the request is in flight.
  await waitFor(async () => (await uploadFiles(env.DATA_DIR)).length > 0, 'the upload to start');

  server.child.kill('SIGTERM');
  await waitFor(() => server.logs.some((line) => line.msg === 'shutting down'), 'the shutdown to begin');
  await t.throwsAsync(fetch(`${server.url}/healthz`), undefined, 'no new connection is accepted');

  upload.finish();
  const response = await upload.response;
  t.is(response.status, 200, response.text);
  t.is(response.headers.connection, 'close');
  const file = JSON.parse(response.text) as { id: string; bytes: number };
  t.is(file.bytes, pdf.length);
  t.is(await server.exited, 0);
  t.deepEqual(await readdir(join(env.DATA_DIR, 'uploads')), [], "no temp file is left, nor the server's uploads directory");

  // The file was stored: a new server on the same data serves it.
  const again = await startServer(env);
  try {
    const content = await fetch(`${again.url}/v1/files/${file.id}/content`, { headers: { authorization: `Bearer ${key}` } });
    t.deepEqual(Buffer.from(await content.arrayBuffer()), pdf);
  } finally {
    await again.stop();
  }
});

test('SIGTERM during an upload that outlasts the grace period: the connection is cut and nothing is left behind', async (t) => {
  const { env, key, server, blobs } = await spawnedServerWithKey({ SHUTDOWN_GRACE_SECONDS: '1' });
  const upload = splitUpload(server, key, makePdf(1, 256 * 1024));
  await waitFor(async () => (await uploadFiles(env.DATA_DIR)).length > 0, 'the upload to start');

  server.child.kill('SIGTERM');
  // The second half is never sent.
  await t.throwsAsync(upload.response);
  t.is(await server.exited, 0);
  t.truthy(server.logs.find((line) => line.msg === 'shutdown grace period over: closing remaining connections'));
  t.deepEqual(await readdir(join(env.DATA_DIR, 'uploads')), [], "no temp file is left, nor the server's uploads directory");
  t.deepEqual(await readdir(blobs), [], 'no blob is left');
});

test('a second signal during the shutdown ends the process at once, with exit code 1', async (t) => {
  const { env, key, server } = await spawnedServerWithKey();
  const upload = splitUpload(server, key, makePdf(1, 256 * 1024));
  await waitFor(async () => (await uploadFiles(env.DATA_DIR)).length > 0, 'the upload to start');

  server.child.kill('SIGTERM');
  await waitFor(() => server.logs.some((line) => line.msg === 'shutting down'), 'the shutdown to begin');
  // The upload holds the graceful stop (30 s of grace by default): only the second signal ends it.
  server.child.kill('SIGINT');
  t.is(await server.exited, 1);
  await t.throwsAsync(upload.response);
  t.falsy(server.logs.find((line) => line.msg === 'stopped'));
});

test('an exception nothing catches in the server ends the process with exit code 1, its stack on stderr', async (t) => {
  const dir = await dataDir();
  const thrower = new URL('../helpers/throw-in-server-thread.js', import.meta.url).href;
  const result = await spawnCli(['serve'], { DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'silent' }, ['--import', thrower]);
  t.is(result.code, 1);
  t.regex(result.stderr, /^koa-model-gateway: the server stopped on an exception nothing caught: Error: thrown by the test\n\s+at /);
});

test('SIGINT stops an idle server at once, closing keep-alive connections', async (t) => {
  const { key, server } = await spawnedServerWithKey();
  const response = await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
  t.is(response.status, 200);
  await response.arrayBuffer();
  server.child.kill('SIGINT');
  t.is(await server.exited, 0);
  t.truthy(server.logs.find((line) => line.msg === 'stopped'));
  await t.throwsAsync(fetch(`${server.url}/healthz`));
});

test("SIGKILL during an upload: the next start removes its temp file, and no sweep touches a live server's upload", async (t) => {
  const { env, key, server } = await spawnedServerWithKey();
  const killed = splitUpload(server, key, makePdf(1, 256 * 1024));
  killed.response.catch(() => undefined);
  await waitFor(async () => (await uploadFiles(env.DATA_DIR)).length > 0, 'the upload to start');
  const [leftover] = await uploadFiles(env.DATA_DIR);
  server.child.kill('SIGKILL');
  await server.exited;

  const next = await spawnServer(env);
  try {
    t.deepEqual(await uploadFiles(env.DATA_DIR), [], "the start removed the dead process's temp file");
    t.truthy(
      next.logs.find((line) => line.msg === 'removed the temp files of uploads cut short by a crash' && line.staleUploads === 1),
      leftover,
    );
    const pdf = makePdf(1, 256 * 1024);
    const live = splitUpload(next, key, pdf);
    await waitFor(async () => (await uploadFiles(env.DATA_DIR)).length > 0, 'the upload to start');
    // A sweep from another process, as the `sweep` command runs one.
    t.is(await removeStaleUploads(join(env.DATA_DIR, 'uploads')), 0);
    live.finish();
    const response = await live.response;
    t.is(response.status, 200, response.text);
    t.like(JSON.parse(response.text), { bytes: pdf.length });
  } finally {
    await next.stop();
  }
});

test('stop() called again while stopping shuts the server down once', async (t) => {
  const server = await startServer({ DATA_DIR: join(await dataDir(), 'data') });
  const codes = await Promise.all([server.stop(), server.stop()]);
  t.deepEqual(codes, [0, 0]);
  t.is(server.logs.filter((line) => line.msg === 'shutting down').length, 1);
  t.is(server.logs.filter((line) => line.msg === 'stopped').length, 1);
});

// The package as it ships: the compiled CLI makes a key and serves the API in processes of their
// own. The API's rules are tested on servers in the tests' process; this checks that the build
// runs them.

test('the compiled CLI makes a key, serves files, models and the dashboard with it, and stops on SIGTERM with exit code 0', async (t) => {
  const data = await tempDataDir();
  t.teardown(() => data.remove());
  const env = { DATA_DIR: data.dir };
  const created = await spawnCli(['keys', 'create', '--account', 'acme', '--json'], env);
  t.is(created.code, 0, created.stderr);
  const { key } = JSON.parse(created.stdout) as CreatedKey;
  const server = await spawnServer(env);
  t.teardown(() => server.stop());
  const auth = { authorization: `Bearer ${key}` };

  const pdf = makePdf(1);
  const uploaded = await fetch(`${server.url}/v1/files`, { method: 'POST', headers: auth, body: uploadForm(pdf) });
  t.is(uploaded.status, 200);
  const { id } = (await uploaded.json()) as { id: string };
  const content = await fetch(`${server.url}/v1/files/${id}/content`, { headers: auth });
  t.deepEqual(Buffer.from(await content.arrayBuffer()), pdf);

  const chat = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] }),
  });
  t.is(chat.status, 200);
  t.like(await chat.json(), { object: 'chat.completion', model: 'echo-1' });

  const dashboard = await fetch(`${server.url}/dashboard`);
  t.is(dashboard.status, 200);
  t.regex(dashboard.headers.get('content-type') ?? '', /^text\/html/);
  t.like(await (await fetch(`${server.url}/openapi.json`)).json(), { openapi: '3.1.0' });

  t.is(await server.stop(), 0);
  t.truthy(server.logs.find((line) => line.msg === 'stopped'));
});

test('run from its sources (`npm run gateway`), the CLI serves and stops on SIGTERM with exit code 0', async (t) => {
  const data = await tempDataDir();
  t.teardown(() => data.remove());
  const server = await spawnServer({ DATA_DIR: data.dir }, { fromSource: true });
  t.teardown(() => server.stop());
  t.like(await (await fetch(`${server.url}/healthz`)).json(), { status: 'ok' });
  t.is(await server.stop(), 0);
  t.truthy(server.logs.find((line) => line.msg === 'stopped'));
});
