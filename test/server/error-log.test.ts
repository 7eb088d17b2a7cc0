import { once } from 'node:events';
import { connect, createServer, type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import test, { type ExecutionContext } from 'ava';
import { Redis } from 'ioredis';
import knexFactory from 'knex';
import Koa, { type Middleware } from 'koa';
import { pino } from 'pino';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { AttemptFailedError } from '../../lib/models/routing/attempt-failed.js';
import { UpstreamCall } from '../../lib/models/upstream-call.js';
import { RedisCreationLimiter } from '../../lib/stores/redis/creation-limiter.js';
import { logAppError } from '../../reference-server/logger.js';
import { listen } from '../helpers/http.js';

interface Written {
  /** The line as written, for its size. */
  raw: string;
  line: Record<string, unknown>;
}

/** One request through `openAIErrors()` and `handler`, with the reference server's error logger. */
async function logged(handler: Middleware): Promise<{ requestId: string; written: Written[] }> {
  const written: Written[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const raw of chunk.toString('utf8').split('\n')) if (raw !== '') written.push({ raw, line: JSON.parse(raw) as Record<string, unknown> });
      done();
    },
  });
  const app = new Koa();
  app.on('error', logAppError(pino({ level: 'debug' }, sink)));
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
  const knex = knexFactory({ client: 'pg', connection: { host: '127.0.0.1', port, user: 'nobody' }, pool: { min: 0, max: 1 }, log: { warn: quiet, error: quiet } });
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
    const addresses = [{ address: '127.0.0.2', family: 4 }, { address: '127.0.0.1', family: 4 }];
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
  t.like(line, { level: 40, msg: 'upstream attempt failed, retrying', requestId: retried.requestId, provider: 'east', upstreamModel: 'gpt-4.1', attempt: 1, outcome: 'ECONNREFUSED' });
});

test('an upstream failure (502) and a silent upstream (504) are short lines naming the provider', async (t) => {
  const refused = Object.assign(new Error(`connect ECONNREFUSED 127.0.0.1:9`), { code: 'ECONNREFUSED' });
  const failed = await logged((ctx) => {
    ctx.state.modelRequest = { model: 'gpt', provider: 'openai', upstreamModel: 'gpt-4o', stream: false, attachments: 0, inputTokens: 0, outputTokens: 0, upstreamFirstByteMs: null, upstreamMs: null, costPicoUsd: 0, attempts: [], cooldowns: [] };
    const call = new UpstreamCall('openai', 60_000);
    call.end();
    throw call.failure(new TypeError('fetch failed', { cause: refused }));
  });
  const line = assertCompact(t, failed.written);
  t.like(line, { msg: 'upstream failed', requestId: failed.requestId, status: 502, kind: 'upstream_error', provider: 'openai' });
  t.is(line.cause, 'TypeError: fetch failed <- ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9');

  const silent = await logged(async (ctx) => {
    ctx.state.modelRequest = { model: 'claude', provider: 'anthropic', upstreamModel: 'claude-x', stream: true, attachments: 0, inputTokens: 0, outputTokens: 0, upstreamFirstByteMs: null, upstreamMs: null, costPicoUsd: 0, attempts: [], cooldowns: [] };
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
