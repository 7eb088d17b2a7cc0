import { context, trace, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import test from 'ava';
import { newFileId } from '../../lib/files/file-id.js';
import type { FileStore } from '../../lib/files/file-store.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { RedisModelLimiter } from '../../lib/stores/redis/model-limiter.js';
import { tracedStore } from '../../lib/tracing/traced-store.js';
import { redisClients } from '../helpers/redis-clients.js';
import { postgresDatabase, withPostgres, withRedis } from '../helpers/services.js';

const exporter = new InMemorySpanExporter();
const sdk = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
sdk.register();
test.after.always(() => sdk.shutdown());
const redis = redisClients(test);
const tracer = trace.getTracer('test');

/** `work` inside a span of its own, as a request's chain runs; resolves with its result and the span's id. */
async function inRequest<T>(work: () => Promise<T>): Promise<{ result: T; requestSpanId: string }> {
  const span = tracer.startSpan('request');
  try {
    const result = await context.with(trace.setSpan(context.active(), span), work);
    return { result, requestSpanId: span.spanContext().spanId };
  } finally {
    span.end();
  }
}

const childrenOf = (spanId: string): ReadableSpan[] => exporter.getFinishedSpans().filter((span) => span.parentSpanContext?.spanId === spanId);

test.serial.beforeEach(() => exporter.reset());

withPostgres(test).serial('KnexFileStore on PostgreSQL: each call inside a request is a span of it, and answers as the store does', async (t) => {
  const db = await postgresDatabase();
  t.teardown(() => db.destroy());
  await migrate(db.knex);
  const files = tracedStore<FileStore>(new KnexFileStore(db.knex), 'FileStore');
  const now = Math.floor(Date.now() / 1000);
  const id = newFileId(now);
  const { result, requestSpanId } = await inRequest(async () => {
    await files.create({ id, account: 'acme', filename: 'a.pdf', bytes: 10, createdAt: now, expiresAt: null }, { maxFiles: 10, maxBytes: 1000 }, now);
    return files.get('acme', id, now);
  });
  t.is(result?.id, id);
  t.deepEqual(
    childrenOf(requestSpanId).map((span) => span.name),
    ['FileStore.create', 'FileStore.get'],
  );
  // Outside a request (a sweep): no span.
  exporter.reset();
  t.is((await files.list('acme', { limit: 10, order: 'desc' }, now)).files.length, 1);
  t.deepEqual(exporter.getFinishedSpans(), []);
});

withRedis(test).serial('RedisModelLimiter: the limit check is a span of the request', async (t) => {
  const limiter = tracedStore(new RedisModelLimiter({ client: await redis.client(), keyPrefix: redis.keyPrefix() }), 'ModelLimiter');
  const { result, requestSpanId } = await inRequest(() => limiter.consume('key_1', { requestsPerMinute: 5 }));
  t.true(result.allowed);
  t.deepEqual(
    childrenOf(requestSpanId).map((span) => span.name),
    ['ModelLimiter.consume'],
  );
});

test.serial('a call that fails: error.type from its code, the span an error, the failure passed on as it was', async (t) => {
  const outage = Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
  const store = tracedStore(
    {
      find: () => Promise.reject(outage),
      close: () => 'closed',
    },
    'Flaky',
  );
  const { requestSpanId } = await inRequest(async () => {
    await t.throwsAsync(store.find(), { is: outage });
    t.is(store.close(), 'closed');
  });
  const [failed, ...others] = childrenOf(requestSpanId);
  t.is(others.length, 0, 'close() is not traced');
  t.is(failed?.name, 'Flaky.find');
  t.is(failed?.attributes['error.type'], 'ECONNRESET');
  t.is(failed?.status.code, SpanStatusCode.ERROR);
});
