import { once } from 'node:events';
import { readdir, writeFile } from 'node:fs/promises';
import { connect, createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import test, { type ExecutionContext } from 'ava';
import { Redis } from 'ioredis';
import knexFactory from 'knex';
import Koa, { type Middleware } from 'koa';
import { pino, type Logger } from 'pino';
import { StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { AttemptFailedError } from '../../lib/models/routing/attempt-failed.js';
import { UpstreamCall } from '../../lib/models/upstream-call.js';
import { RedisCreationLimiter } from '../../lib/stores/redis/creation-limiter.js';
import { runCommand } from '../../reference-server/commands/index.js';
import { logAppError } from '../../reference-server/logger.js';
import { OutageLog } from '../../reference-server/outage-log.js';
import { listen } from '../helpers/http.js';
import { makePdf } from '../helpers/models-pdf.js';
import { mockProviders } from '../helpers/models-upstream.js';
import { pdfOf, uploadForm } from '../helpers/multipart.js';
import { until } from '../helpers/poll.js';
import { stoppableS3Server, type StoppableS3Server } from '../helpers/s3-server.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { createKey, serverWithKey, spawnServer, startServer, tempDataDir, uploadFiles, type LogLine } from '../helpers/server-process.js';
import { tcpProxy } from '../helpers/server-tcp-proxy.js';
import { POSTGRES_URL, REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';

// docs/DEPLOYMENT.md's table of outages on the reference server: PostgreSQL, Redis or the bucket
// refusing or silent, each request that needs it answers 503 within its bound and all recovers by
// itself; and what the log says of an outage, of a failed request and of an abandoned one.

const cleanups: Array<() => Promise<unknown>> = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** Runs a CLI command in this process, as `koa-model-gateway <args> --json`; the key it printed. */
async function cli(env: Record<string, string>, args: string[]): Promise<{ key: string }> {
  const out: string[] = [];
  const code = await runCommand([...args, '--json'], { env, out: (text) => out.push(text), err: () => undefined });
  if (code !== 0) throw new Error(`${args.join(' ')} exited ${code}`);
  return JSON.parse(out.join('\n')) as { key: string };
}

/** A `GATEWAY_CONFIG` in `dir`: the model `gpt-mock` on the mock provider at `upstreamUrl`, no sweep, and `extra`. */
async function mockModelConfig(dir: string, upstreamUrl: string, extra: Record<string, unknown> = {}): Promise<string> {
  const file = join(dir, 'gateway.json');
  const providers = [{ id: 'mock-openai', kind: 'openai', baseURL: `${upstreamUrl}/v1` }];
  const models = [{ id: 'gpt-mock', provider: 'mock-openai', upstreamModel: 'gpt-upstream-1' }];
  await writeFile(file, JSON.stringify({ providers, models, sweep: { intervalSeconds: 0 }, ...extra }));
  return file;
}

/** A request's status, error code and time taken. */
async function timed(send: () => Promise<Response>): Promise<{ status: number; code: string | undefined; ms: number }> {
  const started = performance.now();
  const response = await send();
  const body = (await response.json()) as { error?: { code: string } };
  return { status: response.status, code: body.error?.code, ms: performance.now() - started };
}

/** A chat call to the mock model with `key`. */
function chatCall(url: string, key: string): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-mock', messages: [{ role: 'user', content: 'hi' }] }),
  });
}

// PostgreSQL: refused, every request that needs it (a key's lookup, a file record) answers 503 at
// once; stalled, within the stores' bound (5 s); all recovers by itself.

/** The stores' bound (`timeoutMs` of the Knex stores, the reference server's default). */
const DATABASE_BOUND_MS = 5000;
/** What a request may take beyond it on a shared, busy machine. */
const DATABASE_SLACK_MS = 4000;

/**
 * A deployment on a throwaway PostgreSQL database reached through a proxy the test can cut and
 * stall, Redis, and the mock model (`config` added to its GATEWAY_CONFIG); a key of `acme`.
 */
async function behindPostgresProxy(config: Record<string, unknown> = {}) {
  const [upstream, data, database, postgres] = await Promise.all([
    mockProviders(),
    tempDataDir(),
    throwawayPostgres(),
    tcpProxy({ host: new URL(POSTGRES_URL).hostname, port: Number(new URL(POSTGRES_URL).port || 5432) }),
  ]);
  cleanups.push(() => upstream.close(), data.remove, database.drop, postgres.close);
  const proxied = new URL(database.url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(postgres.port);
  const env = { DATA_DIR: data.dir, DATABASE_URL: proxied.toString(), REDIS_URL, GATEWAY_CONFIG: await mockModelConfig(data.dir, upstream.url, config) };
  return { postgres, env, key: (await cli(env, ['keys', 'create', '--account', 'acme'])).key };
}

withRedis(withPostgres(test))('PostgreSQL refused or stalled: a file list and a model call answer 503 within the bound, and all recovers', async (t) => {
  t.timeout(4 * (DATABASE_BOUND_MS + DATABASE_SLACK_MS), 'requests held while the database stalls');
  // No key read before the fault answers from the cache.
  const { postgres, env, key } = await behindPostgresProxy({ keyCacheSeconds: 0 });
  const server = await startServer(env);
  cleanups.push(() => server.stop());

  const chat = (key: string) => () => chatCall(server.url, key);
  const list = () => fetch(`${server.url}/v1/files`, { headers: { authorization: `Bearer ${key}` } });

  t.like(await timed(chat(key)), { status: 200 });
  for (const fault of ['cut', 'stall'] as const) {
    if (fault === 'cut') await postgres.cut();
    else postgres.stall();
    const bound = fault === 'cut' ? DATABASE_SLACK_MS : DATABASE_BOUND_MS + DATABASE_SLACK_MS;
    for (const answer of await Promise.all([timed(list), timed(chat(key))])) {
      t.like(answer, { status: 503, code: 'service_unavailable' }, fault);
      t.true(answer.ms < bound, `${fault}: answered after ${Math.round(answer.ms)} ms`);
    }
    t.is((await fetch(`${server.url}/healthz`)).status, 200, `${fault}: the process still runs`);
    if (fault === 'cut') await postgres.restore();
    else postgres.resume();
    t.like(
      await until(
        () => timed(list),
        (answer) => answer.status === 200,
        { intervalMs: 100, attempts: 150 },
      ),
      { status: 200 },
      `${fault}: recovered`,
    );
  }
});

withRedis(withPostgres(test))('SIGTERM while PostgreSQL stalls: the process exits within two grace periods, saying the stores did not close', async (t) => {
  t.timeout(40_000, 'the process did not exit');
  const { postgres, env, key } = await behindPostgresProxy();
  const server = await spawnServer({ ...env, SHUTDOWN_GRACE_SECONDS: '1' });
  cleanups.push(async () => server.child.kill('SIGKILL'));
  // A call leaves the pool a connection to close (and, likely, its usage record to write).
  t.is((await chatCall(server.url, key)).status, 200);
  postgres.stall();
  const signalled = performance.now();
  server.child.kill('SIGTERM');
  const code = await server.exited;
  const seconds = (performance.now() - signalled) / 1000;
  t.is(code, 0);
  // Two grace periods of 1 s and the thread's second to end; the rest is room for a busy machine.
  // Before the bound, the process did not exit at all.
  t.true(seconds < 3 + 10, `exited ${seconds.toFixed(1)} s after SIGTERM`);
  t.true(server.logs.some((line) => line.msg === 'the stores did not close within the grace period: stopping without them'));
});

// Redis: with Redis refusing or silent, the calls of a key with model limits and the uploads answer
// 503 within the limiters' bound (500 ms); the calls of a key without limits and every read answer 200.

/** The limiters' bound (`timeoutMs` of the Redis limiters). */
const REDIS_BOUND_MS = 500;
/** What a request may take beyond it on a shared, busy machine. */
const REDIS_SLACK_MS = 4500;

withRedis(test)(
  "Redis refused or silent: a limited key's model call and an upload answer 503 within the bound; an unlimited key's call and reads answer 200",
  async (t) => {
    const [upstream, data, redis] = await Promise.all([
      mockProviders(),
      tempDataDir(),
      tcpProxy({ host: new URL(REDIS_URL).hostname, port: Number(new URL(REDIS_URL).port || 6379) }),
    ]);
    cleanups.push(() => upstream.close(), data.remove, redis.close);
    const config = await mockModelConfig(data.dir, upstream.url);
    const proxied = new URL(REDIS_URL);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(redis.port);
    const env = { DATA_DIR: data.dir, REDIS_URL: proxied.toString(), GATEWAY_CONFIG: config };
    const limited = (await cli(env, ['keys', 'create', '--account', 'limited', '--rpm', '100'])).key;
    const unlimited = (await cli(env, ['keys', 'create', '--account', 'unlimited'])).key;
    const server = await startServer(env);
    cleanups.push(() => server.stop());

    const chat = (key: string) => () => chatCall(server.url, key);
    const upload = () => {
      const form = new FormData();
      form.set('purpose', 'user_data');
      form.set('file', new Blob([makePdf(1)]), 'a.pdf');
      return fetch(`${server.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${unlimited}` }, body: form });
    };
    const list = () => fetch(`${server.url}/v1/files`, { headers: { authorization: `Bearer ${unlimited}` } });

    t.like(await timed(chat(limited)), { status: 200 });
    for (const fault of ['cut', 'stall'] as const) {
      if (fault === 'cut') await redis.cut();
      else redis.stall();
      for (const answer of [await timed(chat(limited)), await timed(upload)]) {
        t.like(answer, { status: 503, code: 'service_unavailable' }, fault);
        t.true(answer.ms < REDIS_BOUND_MS + REDIS_SLACK_MS, `${fault}: answered after ${Math.round(answer.ms)} ms`);
      }
      t.like(await timed(chat(unlimited)), { status: 200 }, fault);
      t.like(await timed(list), { status: 200 }, fault);
      if (fault === 'cut') await redis.restore();
      else redis.resume();
      // ioredis reconnects with a back-off of up to 2 s.
      t.like(
        await until(
          () => timed(chat(limited)),
          (answer) => answer.status === 200,
          { intervalMs: 100, attempts: 150 },
        ),
        { status: 200 },
        `${fault}: recovered`,
      );
    }
  },
);

// The bucket: the reference server in front of a bucket whose server is stopped (SIGSTOP). Its ten
// seconds of stall run beside the other tests, and beside the stopped-bucket tests of test/stores/blob-stores.test.ts.

/** What a call may take beyond its bound on a shared, busy machine. */
const BUCKET_SLACK_MS = 4000;

let stoppableS3: StoppableS3Server;
test.before(async () => {
  stoppableS3 = await stoppableS3Server();
});
test.after.always(() => stoppableS3?.stop());

/** `call`'s value (undefined if it threw) and how long it took. */
async function timedCall<T>(call: () => Promise<T>): Promise<{ value: T | undefined; ms: number }> {
  const started = performance.now();
  try {
    return { value: await call(), ms: performance.now() - started };
  } catch {
    return { value: undefined, ms: performance.now() - started };
  }
}

test('the reference server on a stopped bucket: an upload and a download answer 503 within the default bound (10 s)', async (t) => {
  const DEFAULT_BOUND_MS = 10_000;
  t.timeout(DEFAULT_BOUND_MS + 4 * BUCKET_SLACK_MS, 'requests held while the bucket is stopped');
  const data = await tempDataDir();
  t.teardown(data.remove);
  const env = { ...stoppableS3.env(stoppableS3.freshPrefix()), DATA_DIR: data.dir };
  const { key } = await createKey(env, ['--account', 'stalled']);
  const server = await startServer(env);
  t.teardown(() => server.stop());
  const auth = { authorization: `Bearer ${key}` };
  const upload = () => fetch(`${server.url}/v1/files`, { method: 'POST', headers: auth, body: uploadForm(pdfOf(1000)) });
  const created = await upload();
  t.is(created.status, 200);
  const { id } = (await created.json()) as { id: string };
  const download = () => fetch(`${server.url}/v1/files/${id}/content`, { headers: auth });

  stoppableS3.pause();
  const answers = await Promise.all([timedCall(upload), timedCall(download)]);
  stoppableS3.resume();
  for (const { value, ms } of answers) {
    t.is(value?.status, 503);
    t.true(ms < DEFAULT_BOUND_MS + BUCKET_SLACK_MS, `answered after ${Math.round(ms)} ms`);
  }
  t.is((await download()).status, 200);
});

// The request log: an upload the client abandons.

test('an upload the client abandons is logged as a 499 request, not as a server failure, and leaves nothing', async (t) => {
  const { env, key, server } = await serverWithKey(t, 'acme');
  const { port } = new URL(server.url);

  const socket = connect(Number(port), '127.0.0.1');
  const boundary = 'b0undary';
  socket.write(
    `POST /v1/files HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\n` +
      `Content-Length: 1000000\r\n\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.pdf"\r\n` +
      `Content-Type: application/pdf\r\n\r\n%PDF-1.4 ${'x'.repeat(50_000)}`,
  );
  // Up to 10 s, every 10 ms.
  const soon = { intervalMs: 10, attempts: 1000 };
  // Gone once the server is streaming the file part to its temp file.
  await until(async () => (await uploadFiles(env.DATA_DIR)).length > 0, Boolean, soon);
  socket.destroy();

  const isUpload = (line: LogLine) => line.msg === 'request' && line.path === '/v1/files';
  await until(async () => server.logs.some(isUpload), Boolean, soon);
  t.like(server.logs.find(isUpload), { status: 499, aborted: true, account: 'acme' });
  t.deepEqual(
    server.logs.filter((line) => (line.level as number) >= 50),
    [],
    'no error-level line',
  );
  t.deepEqual(await uploadFiles(env.DATA_DIR), []);
  t.deepEqual(await readdir(join(env.DATA_DIR, 'files')), []);
});

// The outage log: a store's outage is one line, not one per failed request.

interface Line {
  level: number;
  msg: string;
  store?: string;
  failures?: number;
  driverWarnings?: number;
  downForMs?: number;
  [field: string]: unknown;
}

function sink(): { logger: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const raw of chunk.toString('utf8').split('\n')) if (raw !== '') lines.push(JSON.parse(raw) as Line);
      done();
    },
  });
  // pino writes synchronously to a stream it is given: each line is in `lines` once the call returns.
  return { logger: pino({ level: 'info' }, destination), lines };
}

const ACQUIRE_WARNING =
  'Acquire connection error: Error: connect ECONNREFUSED 127.0.0.1:5432\n    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16)';

test('a burst of failures of one store is one line, then a count per second at most, driver warnings folded in', (t) => {
  const { logger, lines } = sink();
  let now = 1_000_000;
  const outages = new OutageLog(logger, { nowMs: () => now });
  t.teardown(() => outages.close());

  // 1,000 failed requests and 300 Knex warnings within the first second of a database outage.
  for (let i = 0; i < 1000; i++) {
    outages.failed('database', { requestId: `r${i}`, status: 503, cause: 'ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:5432' });
    if (i % 10 === 0) outages.warned('database', ACQUIRE_WARNING);
    if (i % 10 === 5) outages.warned('database', ACQUIRE_WARNING);
    now += 0.9;
  }
  t.is(lines.length, 1);
  t.like(lines[0], { level: 50, msg: 'store unavailable', store: 'database', requestId: 'r0' });

  // The next second's first failure writes the count of everything since.
  now += 200;
  outages.failed('database', { requestId: 'late', status: 503 });
  t.is(lines.length, 2);
  t.like(lines[1], { level: 50, msg: 'store still unavailable', store: 'database', failures: 1000, driverWarnings: 200 });
  for (let i = 0; i < 500; i++) outages.failed('database', { status: 503 });
  t.is(lines.length, 2, 'nothing more within the second');

  // Another store's outage is its own.
  outages.failed('redis', { status: 503 });
  t.is(lines.length, 3);
  t.like(lines[2], { msg: 'store unavailable', store: 'redis' });
});

test("a driver warning first is the outage's one line, its first line only, no stack", (t) => {
  const { logger, lines } = sink();
  const outages = new OutageLog(logger, { nowMs: () => 0 });
  t.teardown(() => outages.close());
  for (let i = 0; i < 100; i++) outages.warned('database', ACQUIRE_WARNING);
  outages.failed('database', { status: 503 });
  t.deepEqual(
    lines.map((line) => [line.msg, line.cause]),
    [['store unavailable', 'Acquire connection error: Error: connect ECONNREFUSED 127.0.0.1:5432']],
  );
});

test('a store that is back says so once, with the count of what its outage cost; its next outage is a new one', async (t) => {
  const { logger, lines } = sink();
  let answering = false;
  let now = 0;
  const outages = new OutageLog(logger, { nowMs: () => now, intervalMs: 10 });
  t.teardown(() => outages.close());
  outages.watch('database', async () => {
    if (!answering) throw new Error('refused');
  });

  for (let i = 0; i < 50; i++) outages.failed('database', { status: 503 });
  now = 5;
  answering = true;
  const back = await until(
    async () => lines.filter((line) => line.msg === 'store is back'),
    (found) => found.length > 0,
  );
  t.like(back, [{ level: 30, store: 'database', failures: 49, driverWarnings: 0, downForMs: 5 }]);

  outages.failed('database', { status: 503, requestId: 'again' });
  t.like(lines.at(-1), { msg: 'store unavailable', requestId: 'again' });
  t.is(lines.length, 3);
});

test('requests failing on a store through the app: one line for the burst, a store named by the error or else the database', async (t) => {
  const { logger, lines } = sink();
  const outages = new OutageLog(logger, { nowMs: () => 0 });
  t.teardown(() => outages.close());
  const app = new Koa();
  app.on('error', logAppError(logger, outages));
  app.use(openAIErrors());
  app.use((ctx) => {
    if (ctx.path === '/s3') throw new StoreUnavailableError('the S3 store is unavailable', { store: 's3' });
    throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  });
  const server = await listen(app);
  t.teardown(() => server.close());
  for (let i = 0; i < 20; i++) {
    for (const path of ['/db', '/s3']) t.is((await fetch(`${server.url}${path}`)).status, 503);
  }
  t.deepEqual(
    lines.map((line) => [line.msg, line.store]),
    [
      ['store unavailable', 'database'],
      ['store unavailable', 's3'],
    ],
  );
});

// The error log: a request's failure is one short line, but for the unexpected ones.

interface Written {
  /** The line as written, for its size. */
  raw: string;
  line: Record<string, unknown>;
}

/** One request through `openAIErrors()` and `handler`, with the reference server's error logger. */
async function logged(handler: Middleware): Promise<{ requestId: string; written: Written[] }> {
  const written: Written[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const raw of chunk.toString('utf8').split('\n')) if (raw !== '') written.push({ raw, line: JSON.parse(raw) as Record<string, unknown> });
      done();
    },
  });
  const app = new Koa();
  app.on('error', logAppError(pino({ level: 'debug' }, destination)));
  app.use(openAIErrors());
  app.use(handler);
  const server = await listen(app);
  try {
    const response = await fetch(server.url);
    await response.arrayBuffer();
    return { requestId: response.headers.get('x-request-id') ?? '', written };
  } finally {
    await server.close();
  }
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** An outage's line: short, one line of its own, no stack, no `err` object. */
function assertCompact(t: ExecutionContext, written: Written[]): Record<string, unknown> {
  t.is(written.length, 1);
  const [{ raw, line }] = written as [Written];
  t.false('err' in line, 'no serialised error');
  t.false(raw.includes('    at '), 'no stack frame');
  t.true(raw.length < 600, `${raw.length} bytes: ${raw}`);
  return line;
}

test('a Redis outage is one short error line: store, request id and cause, no stack', async (t) => {
  const redis = new Redis({ port: await closedPort(), host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 1, retryStrategy: () => null });
  redis.on('error', () => undefined);
  t.teardown(() => redis.disconnect());
  const limiter = new RedisCreationLimiter({ client: redis });
  const { requestId, written } = await logged(async () => {
    await limiter.reserve('acme', 1);
  });
  const line = assertCompact(t, written);
  t.like(line, { level: 50, msg: 'store unavailable', requestId, status: 503, kind: 'service_unavailable', store: 'redis' });
  t.regex(String(line.cause), /^StoreUnavailableError: Redis is unavailable <- \w+: ./);
});

test('a database that refuses connections is 503 and its line names the code and the address', async (t) => {
  const port = await closedPort();
  const quiet = () => undefined;
  const knex = knexFactory({
    client: 'pg',
    connection: { host: '127.0.0.1', port, user: 'nobody' },
    pool: { min: 0, max: 1 },
    log: { warn: quiet, error: quiet },
  });
  t.teardown(() => knex.destroy());
  const { requestId, written } = await logged(async () => {
    await knex.raw('select 1');
  });
  const line = assertCompact(t, written);
  t.like(line, { msg: 'store unavailable', requestId, status: 503, kind: 'service_unavailable' });
  t.regex(String(line.cause), new RegExp(`ECONNREFUSED: connect ECONNREFUSED 127\\.0\\.0\\.1:${port}`));
});

test('a host that refuses on each of its addresses (an AggregateError with no message) is named by its first', async (t) => {
  const port = await closedPort();
  const { written } = await logged(async () => {
    // Two addresses for one name, as a dual-stack `localhost` resolves: Node tries each, then gives up with all.
    const addresses = [
      { address: '127.0.0.2', family: 4 },
      { address: '127.0.0.1', family: 4 },
    ];
    const socket = connect({ port, host: 'db.internal', autoSelectFamily: true, lookup: (_host, _options, done) => done(null, addresses) });
    await once(socket, 'connect');
  });
  t.like(assertCompact(t, written), { status: 503, cause: `ECONNREFUSED: connect ECONNREFUSED 127.0.0.2:${port}` });
});

test('a failed attempt that is retried is one short warning naming the deployment, not an error', async (t) => {
  const retried = await logged((ctx) => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    ctx.app.emit('error', new AttemptFailedError('east', 'gpt-4.1', 1, 'ECONNREFUSED', { cause: refused }), ctx);
    ctx.body = { ok: true };
  });
  const line = assertCompact(t, retried.written);
  t.like(line, {
    level: 40,
    msg: 'upstream attempt failed, retrying',
    requestId: retried.requestId,
    provider: 'east',
    upstreamModel: 'gpt-4.1',
    attempt: 1,
    outcome: 'ECONNREFUSED',
  });
});

test('an upstream failure (502) and a silent upstream (504) are short lines naming the provider', async (t) => {
  const refused = Object.assign(new Error(`connect ECONNREFUSED 127.0.0.1:9`), { code: 'ECONNREFUSED' });
  const failed = await logged((ctx) => {
    ctx.state.modelRequest = {
      model: 'gpt',
      provider: 'openai',
      upstreamModel: 'gpt-4o',
      stream: false,
      attachments: 0,
      inputTokens: 0,
      outputTokens: 0,
      upstreamFirstByteMs: null,
      upstreamMs: null,
      costPicoUsd: 0,
      attempts: [],
      cooldowns: [],
    };
    const call = new UpstreamCall('openai', 60_000);
    call.end();
    throw call.failure(new TypeError('fetch failed', { cause: refused }));
  });
  const line = assertCompact(t, failed.written);
  t.like(line, { msg: 'upstream failed', requestId: failed.requestId, status: 502, kind: 'upstream_error', provider: 'openai' });
  t.is(line.cause, 'TypeError: fetch failed <- ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9');

  const silent = await logged(async (ctx) => {
    ctx.state.modelRequest = {
      model: 'claude',
      provider: 'anthropic',
      upstreamModel: 'claude-x',
      stream: true,
      attachments: 0,
      inputTokens: 0,
      outputTokens: 0,
      upstreamFirstByteMs: null,
      upstreamMs: null,
      costPicoUsd: 0,
      attempts: [],
      cooldowns: [],
    };
    const call = new UpstreamCall('anthropic', 1);
    await once(call.signal, 'abort');
    throw call.failure(call.signal.reason);
  });
  t.like(assertCompact(t, silent.written), {
    status: 504,
    kind: 'upstream_timeout',
    provider: 'anthropic',
    cause: "provider 'anthropic' was silent for 1 ms",
  });
});

test('an unexpected error (500) is logged whole, with its stack, for whoever fixes it', async (t) => {
  const { requestId, written } = await logged(() => {
    throw new RangeError('a bug');
  });
  t.is(written.length, 1);
  const { line } = written[0] as Written;
  t.like(line, { level: 50, msg: 'request failed', requestId, err: { type: 'RangeError', message: 'a bug' } });
  t.regex(String((line.err as { stack?: unknown }).stack), /RangeError: a bug\n\s+at /);
});
