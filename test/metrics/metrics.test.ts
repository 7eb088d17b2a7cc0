import { PassThrough } from 'node:stream';
import Router from '@koa/router';
import test, { type ExecutionContext } from 'ava';
import Koa from 'koa';
import { register as globalRegistry } from 'prom-client';
import { apiKey } from '../../lib/auth/api-key.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { errors } from '../../lib/errors/gateway-error.js';
import { createGatewayMetrics, type GatewayMetrics } from '../../lib/metrics/gateway-metrics.js';
import { httpMetrics } from '../../lib/metrics/http-metrics.js';
import { serveMetrics } from '../../lib/metrics/serve-metrics.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';
import { listen, type Listening } from '../helpers/http.js';
import { parseMetrics, value, type Sample } from '../helpers/prometheus.js';

/** Scrapes `GET /metrics` from a listener of its own, as Prometheus would. */
async function scrape(metrics: GatewayMetrics): Promise<{ text: string; samples: Sample[]; contentType: string | null }> {
  const server = await listen(new Koa().use(serveMetrics({ metrics })));
  try {
    const res = await fetch(`${server.url}/metrics`);
    const text = await res.text();
    return { text, samples: parseMetrics(text), contentType: res.headers.get('content-type') };
  } finally {
    await server.close();
  }
}

/**
 * Resolves once `count` requests have been observed: a response is observed when it has ended on
 * the server, which may come after the client has read it.
 */
function untilObserved(metrics: GatewayMetrics, count: number): Promise<void> {
  const observe = metrics.observeRequest;
  let seen = 0;
  return new Promise((resolve) => {
    metrics.observeRequest = (request) => {
      observe(request);
      seen += 1;
      if (seen === count) resolve();
    };
  });
}

const ACCOUNT = 'acct-secret-name';
const FILE_ID = 'file-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
// An upstream time no request in a test can reach (AVA stops a test after a minute).
const UPSTREAM_HOUR_MS = 3_600_000;

/** An API of the gateway's shape: metrics first, Shape A errors, keys, a router with a path parameter and a stream. */
async function gateway(t: ExecutionContext, metrics: GatewayMetrics): Promise<{ server: Listening; key: string }> {
  const keys = new MemoryKeyStore();
  const { key } = await createApiKey(keys, { prefix: 'kmg', account: ACCOUNT, scopes: ['files:read'] });
  const app = new Koa();
  app.use(httpMetrics({ metrics, upstreamMs: (ctx) => (ctx.path === '/v1/slow-upstream' ? UPSTREAM_HOUR_MS : undefined) }));
  app.use(openAIErrors());
  app.use(apiKey({ store: keys }));
  const router = new Router();
  router.get('/v1/files/:file_id', (ctx) => {
    if (ctx.params.file_id !== FILE_ID) throw errors.fileNotFound();
    ctx.body = { id: FILE_ID, filename: 'quarterly-report.pdf' };
  });
  router.get('/v1/slow-upstream', async (ctx) => {
    await new Promise((resolve) => setImmediate(resolve));
    ctx.body = 'ok';
  });
  app.use(router.routes());
  app.use(router.allowedMethods());
  const server = await listen(app);
  t.teardown(() => server.close());
  return { server, key };
}

test('HTTP requests are counted by route pattern and status, never by raw path; unrouted requests share one label', async (t) => {
  const metrics = createGatewayMetrics();
  const { server, key } = await gateway(t, metrics);
  const observed = untilObserved(metrics, 5);
  const get = async (path: string, headers: Record<string, string> = { authorization: `Bearer ${key}` }) => {
    const res = await fetch(server.url + path, { headers });
    await res.arrayBuffer();
    return res.status;
  };
  t.is(await get(`/v1/files/${FILE_ID}`), 200);
  t.is(await get(`/v1/files/${FILE_ID}`), 200);
  t.is(await get('/v1/files/file-BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB'), 404);
  t.is(await get('/v1/no/such/thing'), 404);
  t.is(await get(`/v1/files/${FILE_ID}`, {}), 401);
  await observed;
  const { samples, text, contentType } = await scrape(metrics);
  t.is(contentType, 'text/plain; version=0.0.4; charset=utf-8');
  const route = 'GET /v1/files/:file_id';
  t.is(value(samples, 'kmg_http_requests_total', { route, status: '200' }), 2);
  t.is(value(samples, 'kmg_http_requests_total', { route, status: '404' }), 1);
  t.is(value(samples, 'kmg_http_requests_total', { route: 'unmatched', status: '404' }), 1);
  t.is(value(samples, 'kmg_http_requests_total', { route: 'unmatched', status: '401' }), 1);
  t.is(value(samples, 'kmg_http_request_duration_seconds_count', { route }), 3);
  t.is(value(samples, 'kmg_gateway_overhead_seconds_count', { route }), 3);
  const routes = new Set(samples.filter((sample) => sample.name === 'kmg_http_requests_total').map((sample) => sample.labels.route));
  t.deepEqual([...routes].sort(), [route, 'unmatched']);
  for (const secret of [key, ACCOUNT, FILE_ID, 'quarterly-report', 'no/such']) t.false(text.includes(secret), secret);
});

test('the gateway overhead is the request time minus the upstream time the route reports', async (t) => {
  const metrics = createGatewayMetrics();
  const { server, key } = await gateway(t, metrics);
  const observed = untilObserved(metrics, 1);
  await (await fetch(`${server.url}/v1/slow-upstream`, { headers: { authorization: `Bearer ${key}` } })).text();
  await observed;
  const { samples } = await scrape(metrics);
  const route = 'GET /v1/slow-upstream';
  const total = value(samples, 'kmg_http_request_duration_seconds_sum', { route }) ?? Number.NaN;
  const overhead = value(samples, 'kmg_gateway_overhead_seconds_sum', { route }) ?? Number.NaN;
  // The route reports more upstream time than the whole request took: the overhead is 0, not negative.
  t.true(total > 0 && total < UPSTREAM_HOUR_MS / 1000, String(total));
  t.is(overhead, 0);
});

test('a streamed response is observed when its last byte is sent, or when the client leaves, not when the handler returns', async (t) => {
  const metrics = createGatewayMetrics();
  const streams: PassThrough[] = [];
  const router = new Router();
  router.get('/v1/stream', (ctx) => {
    const stream = new PassThrough();
    streams.push(stream);
    ctx.type = 'text/event-stream';
    ctx.body = stream;
    stream.write('data: first\n\n');
  });
  const app = new Koa();
  app.use(httpMetrics({ metrics }));
  app.use(router.routes());
  app.on('error', () => undefined); // the second client leaves mid-stream on purpose
  const server = await listen(app);
  t.teardown(() => server.close());
  let observed = 0;
  const observe = metrics.observeRequest;
  metrics.observeRequest = (request) => {
    observe(request);
    observed += 1;
  };

  const finished = untilObserved(metrics, 1);
  const res = await fetch(`${server.url}/v1/stream`);
  const reader = res.body!.getReader();
  await reader.read(); // the first event: the handler has long returned
  t.is(observed, 0);
  streams[0]!.end('data: last\n\n');
  while (!(await reader.read()).done);
  await finished;
  t.is(observed, 1);

  const left = untilObserved(metrics, 1);
  const controller = new AbortController();
  const second = await fetch(`${server.url}/v1/stream`, { signal: controller.signal });
  await second.body!.getReader().read();
  controller.abort();
  await left;
  const { samples } = await scrape(metrics);
  // The client that left mid-stream is a 499, as the request log and the usage record have it.
  t.is(value(samples, 'kmg_http_requests_total', { route: 'GET /v1/stream', status: '200' }), 1);
  t.is(value(samples, 'kmg_http_requests_total', { route: 'GET /v1/stream', status: '499' }), 1);
  streams[1]!.destroy();
});

test('model calls add upstream timings, tokens and cost by catalog model and provider (cost by account too); calls that reached no upstream add nothing', async (t) => {
  const metrics = createGatewayMetrics();
  metrics.observeModelCall(
    usageRecord({
      model: 'echo-1',
      provider: 'local',
      upstreamMs: 250,
      upstreamFirstByteMs: 20,
      inputTokens: 30,
      outputTokens: 7,
      costPicoUsd: 250_000_000_000,
    }),
  );
  metrics.observeModelCall(
    usageRecord({
      model: 'echo-1',
      provider: 'local',
      upstreamMs: 750,
      upstreamFirstByteMs: null,
      inputTokens: 10,
      outputTokens: 3,
      costPicoUsd: 500_000_000_000,
    }),
  );
  metrics.observeModelCall(usageRecord({ model: 'made-up-by-client', provider: null, upstreamMs: null, upstreamFirstByteMs: null, status: 404 }));
  metrics.limitRefused('requests');
  metrics.limitRefused('requests');
  metrics.limitRefused('file_storage');
  metrics.uploaded(1000);
  metrics.uploaded(24);
  const { samples, text } = await scrape(metrics);
  const labels = { provider: 'local', model: 'echo-1' };
  t.is(value(samples, 'kmg_upstream_duration_seconds_count', labels), 2);
  t.is(value(samples, 'kmg_upstream_duration_seconds_sum', labels), 1);
  t.is(value(samples, 'kmg_upstream_duration_seconds_bucket', { ...labels, le: '0.25' }), 1);
  t.is(value(samples, 'kmg_upstream_time_to_first_byte_seconds_count', labels), 1);
  t.is(value(samples, 'kmg_model_tokens_total', { model: 'echo-1', direction: 'input' }), 40);
  t.is(value(samples, 'kmg_model_tokens_total', { model: 'echo-1', direction: 'output' }), 10);
  t.is(value(samples, 'kmg_limit_refusals_total', { kind: 'requests' }), 2);
  t.is(value(samples, 'kmg_limit_refusals_total', { kind: 'file_storage' }), 1);
  t.is(value(samples, 'kmg_uploaded_bytes_total'), 1024);
  t.false(text.includes('made-up-by-client'));
  t.is(value(samples, 'kmg_cost_usd_total', { model: 'echo-1', account: 'acme' }), 0.75);
  // The record's key never; its account only as the cost's label.
  t.false(text.includes('key_a'));
  t.deepEqual(
    text.split('\n').filter((line) => line.includes('acme')),
    ['kmg_cost_usd_total{model="echo-1",account="acme"} 0.75'],
  );
});

test('each metrics object has a registry of its own; nothing lands in prom-client’s global registry', async (t) => {
  const [one, two] = [createGatewayMetrics(), createGatewayMetrics()];
  one.uploaded(5);
  t.is(value((await scrape(one)).samples, 'kmg_uploaded_bytes_total'), 5);
  t.is(value((await scrape(two)).samples, 'kmg_uploaded_bytes_total'), 0);
  t.is(globalRegistry.getSingleMetric('kmg_uploaded_bytes_total'), undefined);
});

test('the metrics listener answers GET /metrics only: other paths 404, other methods 405', async (t) => {
  const server = await listen(new Koa().use(serveMetrics({ metrics: createGatewayMetrics() })));
  t.teardown(() => server.close());
  t.is((await fetch(`${server.url}/v1/files`)).status, 404);
  const post = await fetch(`${server.url}/metrics`, { method: 'POST' });
  t.is(post.status, 405);
  t.is(post.headers.get('allow'), 'GET, HEAD');
});

test('a route hook that throws is reported on app.on("error"), and the process goes on', async (t) => {
  const metrics = createGatewayMetrics();
  const app = new Koa();
  const reported = new Promise<unknown>((resolve) => app.on('error', resolve));
  app.use(
    httpMetrics({
      metrics,
      route: () => {
        throw new Error('bad route hook');
      },
    }),
  );
  app.use((ctx) => {
    ctx.body = 'ok';
  });
  const server = await listen(app);
  t.teardown(() => server.close());
  t.is(await (await fetch(server.url)).text(), 'ok');
  t.like(await reported, { message: 'bad route hook' });
});

test('options are checked when the middleware is made', (t) => {
  t.throws(() => httpMetrics({ metrics: {} as GatewayMetrics }), { instanceOf: TypeError });
  t.throws(() => serveMetrics({ metrics: createGatewayMetrics(), path: 'metrics' }), { instanceOf: TypeError });
});
