import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { ConfigError } from '../../reference-server/config-error.js';
import { diagLogger, startTracing } from '../../reference-server/tracing.js';
import { uploadForm, pdfOf } from '../helpers/multipart.js';
import { createKey, spawnServer, startServer, tempDataDir } from '../helpers/server-process.js';

/** What a local OTLP receiver got: one entry per export request. */
interface Export {
  method: string;
  path: string;
  contentType: string;
  body: Buffer;
}

/** An OTLP/HTTP receiver on a loopback port, answering every export with 200 and an empty JSON body. */
async function receiver(t: ExecutionContext) {
  const exports: Export[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      exports.push({ method: req.method ?? '', path: req.url ?? '', contentType: req.headers['content-type'] ?? '', body: Buffer.concat(chunks) });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, exports };
}

/** A port nothing listens on: a collector that is down. */
async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The compiled server with `otel` in its environment and a key; one chat completion made through it; stopped. */
async function tracedCall(t: ExecutionContext, otel: Record<string, string>) {
  const temp = await tempDataDir();
  t.teardown(() => temp.remove());
  const env = { DATA_DIR: join(temp.dir, 'data'), ...otel };
  const { key } = await createKey(env, ['--account', 'acme']);
  const server = await spawnServer(env);
  t.teardown(() => void server.stop());
  const statuses: number[] = [];
  for (const stream of [false, true]) {
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo-1', stream, messages: [{ role: 'user', content: 'hello traces' }] }),
    });
    await response.text();
    statuses.push(response.status);
  }
  // Shutdown exports what is still waiting.
  const code = await server.stop();
  return { statuses, code, logs: server.logs, key, stderr: server.stderr() };
}

test('OTLP http/protobuf: every call exported to /v1/traces on shutdown, as protobuf', async (t) => {
  const collector = await receiver(t);
  const { statuses, code } = await tracedCall(t, { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url });
  t.deepEqual(statuses, [200, 200]);
  t.is(code, 0);
  t.true(collector.exports.length > 0);
  for (const sent of collector.exports) {
    t.is(sent.method, 'POST');
    t.is(sent.path, '/v1/traces');
    t.is(sent.contentType, 'application/x-protobuf');
  }
  // Span names and string attributes are plain UTF-8 inside the protobuf.
  const bytes = Buffer.concat(collector.exports.map((sent) => sent.body));
  for (const text of ['POST /v1/chat/completions', 'chat echo-1', 'gen_ai.operation.name', 'koa-model-gateway']) t.true(bytes.includes(text), text);
});

test('OTLP http/json: the spans, the service name of OTEL_SERVICE_NAME, the resource of OTEL_RESOURCE_ATTRIBUTES, the trace id of the log line', async (t) => {
  const collector = await receiver(t);
  const { statuses, code, logs, key } = await tracedCall(t, {
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/custom/traces`,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: 'gateway-under-test',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
  });
  t.deepEqual(statuses, [200, 200]);
  t.is(code, 0);
  interface JsonSpan {
    traceId: string;
    name: string;
    kind: number;
    attributes: Array<{ key: string; value: Record<string, unknown> }>;
  }
  interface JsonExport {
    resourceSpans: Array<{ resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> }; scopeSpans: Array<{ spans: JsonSpan[] }> }>;
  }
  const spans: JsonSpan[] = [];
  const resource = new Map<string, string | undefined>();
  for (const sent of collector.exports) {
    t.is(sent.path, '/custom/traces');
    t.is(sent.contentType, 'application/json');
    const body = JSON.parse(sent.body.toString('utf8')) as JsonExport;
    for (const { resource: ofSpans, scopeSpans } of body.resourceSpans) {
      for (const attribute of ofSpans.attributes) resource.set(attribute.key, attribute.value.stringValue);
      for (const scope of scopeSpans) spans.push(...scope.spans);
    }
  }
  t.is(resource.get('service.name'), 'gateway-under-test');
  t.is(resource.get('deployment.environment.name'), 'test');
  const servers = spans.filter((span) => span.name === 'POST /v1/chat/completions');
  const attempts = spans.filter((span) => span.name === 'chat echo-1');
  t.is(servers.length, 2);
  t.is(attempts.length, 2);
  // OTLP's SpanKind: 2 server, 3 client.
  t.true(servers.every((span) => span.kind === 2));
  t.true(attempts.every((span) => span.kind === 3));
  const streamed = attempts.find((span) => span.attributes.some((attribute) => attribute.key === 'gen_ai.request.stream'));
  t.truthy(streamed?.attributes.find((attribute) => attribute.key === 'gen_ai.response.time_to_first_chunk'));
  // Each request's log line names its trace.
  const logged = logs.filter((line) => line.msg === 'request' && line.path === '/v1/chat/completions').map((line) => line.traceId);
  t.deepEqual(logged.sort(), servers.map((span) => span.traceId).sort());
  t.false(collector.exports.some((sent) => sent.body.includes(key)));
  t.false(collector.exports.some((sent) => sent.body.includes('hello traces')));
});

test('a collector that is down: the calls are answered as usual, and the server stops cleanly', async (t) => {
  const port = await closedPort();
  const { statuses, code, logs, stderr } = await tracedCall(t, { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` });
  t.deepEqual(statuses, [200, 200]);
  t.is(code, 0);
  t.false(
    logs.some((line) => line.msg === 'request failed'),
    JSON.stringify(logs),
  );
  t.is(stderr, '');
  t.true(logs.some((line) => line.msg === 'stopped'));
});

test('a bad OTLP endpoint or protocol is one line naming the variable given, never its value', async (t) => {
  const silent = pino({ level: 'silent' });
  for (const [env, message] of [
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'not-a-url' }, 'OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL'],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://user:secret@collector/v1/traces' }, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:// or https:// URL'],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' },
      "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http/protobuf or http/json, got 'grpc'",
    ],
  ] as const) {
    await t.throwsAsync(startTracing(env, silent), { instanceOf: ConfigError, message });
  }
});

// Serial: it registers the process's tracer, which the concurrent tests of this file use too.
test.serial("the tracing line gives the collector's address without the credentials it may hold", async (t) => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const logger = pino({ level: 'info' }, sink);
  const tracing = await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://user:otel-secret@127.0.0.1:1' }, logger);
  t.teardown(() => tracing?.shutdown());
  const line = JSON.parse(lines.find((text) => text.includes('"msg":"tracing"')) ?? '{}') as { url?: string };
  t.is(line.url, 'http://127.0.0.1:1/v1/traces');
  t.false(lines.join('').includes('otel-secret'));
});

test("the SDK's messages: dropped spans at most once a minute with the count since the last line; an exporter's error as its message, its stack apart", (t) => {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  let now = Date.parse('2030-01-15T12:00:00Z');
  const diag = diagLogger(pino({ level: 'info' }, sink), () => now);
  // A slow collector: the batch processor reports what it dropped every few seconds.
  for (const [count, after] of [
    [3, 0],
    [5, 3_000],
    [7, 3_000],
    [1, 60_000],
    [2, 3_000],
  ] as const) {
    now += after;
    diag.warn(`Dropped ${count} spans because maxQueueSize reached`);
  }
  t.deepEqual(
    lines.map(({ msg, spans, repeated }) => ({ msg, spans, repeated })),
    [
      { msg: 'Dropped 3 spans since the last such line: the export queue was full', spans: 3, repeated: undefined },
      { msg: 'Dropped 13 spans since the last such line: the export queue was full', spans: 13, repeated: 2 },
    ],
  );
  lines.splice(0);
  // How @opentelemetry/core's error handler writes an exporter's error: its properties as JSON.
  const stack = 'Error: connect ECONNREFUSED 127.0.0.1:4318\n    at TCPConnectWrap.afterConnect (node:net:1611:16)';
  diag.error(JSON.stringify({ stack, message: 'connect ECONNREFUSED 127.0.0.1:4318', name: 'Error' }));
  t.like(lines[0], { component: 'tracing', msg: 'connect ECONNREFUSED 127.0.0.1:4318', stack });
});

test('an OTLP protocol it does not speak stops the start, naming the setting', async (t) => {
  const temp = await tempDataDir();
  t.teardown(() => temp.remove());
  const error = await t.throwsAsync(
    spawnServer({ DATA_DIR: join(temp.dir, 'data'), OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }),
  );
  t.regex(error?.message ?? '', /OTEL_EXPORTER_OTLP_PROTOCOL must be http\/protobuf or http\/json/);
});

test('OTEL_TRACES_SAMPLER=always_off: nothing is exported, the calls are answered and still logged with a trace id', async (t) => {
  const collector = await receiver(t);
  const { statuses, code, logs } = await tracedCall(t, { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_TRACES_SAMPLER: 'always_off' });
  t.deepEqual(statuses, [200, 200]);
  t.is(code, 0);
  t.deepEqual(collector.exports, []);
  const logged = logs.filter((line) => line.msg === 'request' && line.path === '/v1/chat/completions');
  t.is(logged.length, 2);
  for (const line of logged) t.regex(String(line.traceId), /^[0-9a-f]{32}$/);
});

test('a gateway started twice in one process exports the spans of each: shutdown gives the globals up', async (t) => {
  const collector = await receiver(t);
  const temp = await tempDataDir();
  t.teardown(() => temp.remove());
  const env = { DATA_DIR: join(temp.dir, 'data'), OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' };
  for (const round of [1, 2]) {
    const server = await startServer(env);
    t.is((await fetch(`${server.url}/healthz`)).status, 200);
    await server.stop();
    t.is(collector.exports.length, round, `after gateway ${round}`);
  }
  t.true(collector.exports.every((sent) => sent.body.includes('GET /healthz')));
});

test.serial('with metrics and tracing both on, downloads and model calls, streamed or not, raise no process warning', async (t) => {
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => warnings.push(warning);
  process.on('warning', onWarning);
  t.teardown(() => void process.off('warning', onWarning));
  const collector = await receiver(t);
  const temp = await tempDataDir();
  t.teardown(() => temp.remove());
  const env = { DATA_DIR: join(temp.dir, 'data'), METRICS_PORT: '0', OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' };
  const { key } = await createKey(env, ['--account', 'acme']);
  const server = await startServer(env);
  t.teardown(() => server.stop());
  const authorization = `Bearer ${key}`;
  const created = await fetch(`${server.url}/v1/files`, { method: 'POST', headers: { authorization }, body: uploadForm(pdfOf(2048)) });
  t.is(created.status, 200);
  const { id } = (await created.json()) as { id: string };
  // Each middleware and a streamed body add their listeners to one response: one of each is enough.
  const download = await fetch(`${server.url}/v1/files/${id}/content`, { headers: { authorization } });
  t.is((await download.arrayBuffer()).byteLength, 2048);
  for (const stream of [false, true]) {
    const call = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo-1', stream, messages: [{ role: 'user', content: 'hi' }] }),
    });
    t.is(call.status, 200);
    await call.text();
  }
  // A warning is emitted on the next tick.
  await new Promise((resolve) => setImmediate(resolve));
  t.deepEqual(
    warnings.map((warning) => `${warning.name}: ${warning.message}\n${warning.stack}`),
    [],
  );
});
