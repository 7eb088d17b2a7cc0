/**
 * Proxy: what a gateway adds to a model call (issues 18 and 34), measured as an outsider measures
 * it. A mock provider (bench/servers/mock-upstream.ts, on the load core) answers Chat Completions,
 * Messages, the Responses API and embeddings (BENCH_PROXY_ROUTES=embeddings: a native call, never
 * streamed); in front of it, in one run, interleaved round by round: nothing
 * (straight to the mock), the floor (bare Koa + one undici Pool that parses the request and the
 * answer and rewrites `model` in both, piping event streams), and the reference server started as
 * a user starts it (`node dist/reference-server/cli.js serve`, LOG_LEVEL=info to a pipe, the
 * embedded default, one key made with the CLI): with `modelLimits` (in memory) and METRICS_PORT on
 * (the headline case), without them, and with traces exported to a local sink; and Portkey's
 * gateway (fetched into a cache on first use). Per case and endpoint: req/s, latency and the
 * server's CPU per call (every thread, /proc/PID/stat before and after each run) at 50
 * connections; latency one request at a time over a keep-alive connection, minus the mock's own;
 * streams of 1,000 events relayed one at a time (first byte, last byte, CPU per stream). Every
 * figure is shown as its spread over the rounds, and a target counts only when the whole spread
 * is on one side of it. Before the rounds, the peak RSS of each gateway holding 1,000 streams open.
 * BENCH_BASELINE=<another checkout> adds its reference-server cases, marked "(baseline)", each run
 * right beside the same case of this checkout, first in odd rounds and second in even ones.
 * First of all, in this process: what splitting one 20 MB upstream event costs (the EventSplitter
 * of this checkout, and of BENCH_BASELINE's beside it, round by round).
 * Run: node --import tsx bench/proxy.ts
 */
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { Client, Pool } from 'undici';
import { EventSplitter } from '../lib/http/server-sent-events.js';
import * as thisCheckout from './lib/gateway.js';
import type { Deployment } from './lib/gateway.js';
import { DURATION, load, median, percentiles, WARMUP, type LoadResult } from './lib/load.js';
import { freePort, isMain, type Service } from './lib/processes.js';
import { configureMock, PORTKEY_VERSION, startBareProxy, startHitFloor, startMockUpstream, startOtlpSink, startPortkey } from './lib/proxies.js';
import { becomeLoadGenerator, cpuMicros, machine, memory, PINNING, sampleRss } from './lib/system.js';
import { mib, num, spread, table } from './lib/table.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const CONNECTIONS = 50;
/** Requests sent one at a time per case, endpoint and round (after a tenth as many unmeasured). */
const ONE_AT_A_TIME = Number(process.env.BENCH_PROXY_REQUESTS ?? 2000);
/** 1,000-event streams relayed one at a time per case, endpoint and round. */
const STREAMS = Number(process.env.BENCH_PROXY_STREAMS ?? 20);
const STREAM_EVENTS = 1000;
/** Streams held open at once for the memory figure; 0 leaves it out. */
const HELD_STREAMS = Number(process.env.BENCH_PROXY_HELD ?? 1000);
const HOLD_TIMEOUT_MS = 120_000;
const ACCOUNT = 'acct_proxy_bench';
const MOCK_KEY = 'sk-mock-provider-key';
/** One upstream event this large, cut as a socket delivers it, for the splitter's figure. */
const LARGE_EVENT_BYTES = 20_000_000;
const SOCKET_CHUNK_BYTES = 65_536;
// Generous limits: every call is counted and checked, none refused.
const RPM = 1_000_000_000;
const TPM = 1_000_000_000_000;

type RouteName = 'chat' | 'messages' | 'translated' | 'responses' | 'embeddings';

interface Route {
  name: RouteName;
  path: string;
  json: Buffer;
  /** Undefined for an endpoint that never streams (embeddings). */
  stream: Buffer | undefined;
  /** The `cache-hit` case's stream: a field more (`temperature: 1`) gives it an entry of its own, not the JSON call's. */
  cachedStream: Buffer | undefined;
  /** Matches one text delta of the stream, however a gateway re-serialises it. */
  delta: RegExp;
  /** The format the client speaks: its SDK's headers, and Portkey's provider. */
  provider: 'openai' | 'anthropic';
  /** A model whose provider speaks the other format: the reference server translates (Portkey has no such case). */
  translated: boolean;
}

function route(
  name: RouteName,
  path: string,
  body: Record<string, unknown>,
  delta: RegExp,
  provider: Route['provider'],
  translated = false,
  streams = true,
): Route {
  const stream = streams ? Buffer.from(JSON.stringify({ ...body, stream: true })) : undefined;
  const cachedStream = streams ? Buffer.from(JSON.stringify({ ...body, temperature: 1, stream: true })) : undefined;
  return { name, path, json: Buffer.from(JSON.stringify(body)), stream, cachedStream, delta, provider, translated };
}

const SAY_HELLO = [{ role: 'user', content: 'Say hello.' }];
const CHAT_DELTA = /"content":\s*"tok"/g;
const ROUTES: Route[] = [
  route('chat', '/v1/chat/completions', { model: 'bench-gpt', messages: SAY_HELLO, max_tokens: 16 }, CHAT_DELTA, 'openai'),
  route('messages', '/v1/messages', { model: 'bench-claude', max_tokens: 16, messages: SAY_HELLO }, /"text":\s*"tok"/g, 'anthropic'),
  // Chat Completions to a model served by a Messages provider. The floor sends it to the mock's
  // Chat Completions as it is: it is there to be compared with the native call of the same case.
  route('translated', '/v1/chat/completions', { model: 'bench-claude', messages: SAY_HELLO, max_tokens: 16 }, CHAT_DELTA, 'openai', true),
  route('responses', '/v1/responses', { model: 'bench-gpt', input: 'Say hello.', max_output_tokens: 16 }, /"delta":\s*"tok"/g, 'openai'),
  // As the openai SDK asks by default: base64. Passed through natively; never streamed.
  route('embeddings', '/v1/embeddings', { model: 'bench-embed', input: 'Say hello.', encoding_format: 'base64' }, /$^/g, 'openai', false, false),
];
const DEFAULT_ROUTES: RouteName[] = ['chat', 'messages', 'translated', 'embeddings'];
/** Catalog id → the mock's model name: the reference server's catalog and the floor's rewrite. */
const UPSTREAM_MODELS = { 'bench-gpt': 'mock-gpt', 'bench-claude': 'mock-claude', 'bench-embed': 'mock-embed' };

/** The names a comma-separated variable lists (`defaults` when unset), refusing unknown ones. */
function chosen<T extends string>(variable: string, all: readonly T[], defaults: readonly T[] = all): T[] {
  const raw = process.env[variable];
  if (raw === undefined || raw === '') return [...defaults];
  const names = raw.split(',').map((name) => name.trim());
  const unknown = names.filter((name) => !all.includes(name as T));
  if (unknown.length > 0) throw new Error(`bench: ${variable}: unknown ${unknown.join(', ')} (known: ${all.join(', ')})`);
  return names as T[];
}

/**
 * `bare`: the floor; `bare-pipe`: the floor passing answers back unparsed (the floor before issue
 * 34); `gateway`: the reference server with `modelLimits` and METRICS_PORT (the headline case);
 * `gateway-plain`: without them; `tracing`: the headline case exporting every trace to a local
 * sink; `postgres`: the headline case on PostgreSQL + Redis; `cache-hit`: the headline case with
 * every call asking for the response cache (`Cache-Control: max-age`), so that every call after
 * the first of each endpoint is a hit (its streams have an entry of their own, which the probe's
 * stream fills with the upstream's 1,000 deltas, replayed by each stream after it); `hit-floor`: the
 * floor for a hit (bench/servers/hit-floor.ts: bare Koa doing only what the spec asks of a call
 * answered from the cache, JSON answers only); `portkey`: Portkey's gateway.
 */
const CASE_KINDS = ['bare', 'bare-pipe', 'gateway', 'gateway-plain', 'tracing', 'postgres', 'cache-hit', 'hit-floor', 'portkey'] as const;
type CaseKind = (typeof CASE_KINDS)[number] | 'direct';
type ReferenceKind = Extract<CaseKind, 'gateway' | 'gateway-plain' | 'tracing' | 'postgres' | 'cache-hit'>;
const DEFAULT_CASES: CaseKind[] = ['bare', 'gateway', 'gateway-plain', 'tracing', 'cache-hit', 'portkey'];
const isReference = (kind: CaseKind): kind is ReferenceKind =>
  kind === 'gateway' || kind === 'gateway-plain' || kind === 'tracing' || kind === 'postgres' || kind === 'cache-hit';

interface Case {
  kind: CaseKind;
  /** A reference-server case of the BENCH_BASELINE checkout. */
  baseline: boolean;
  name: string;
  service: Service;
  /** A reference server's data: its usage records time each call from the inside. */
  deployment?: Deployment;
  headers(route: Route): Record<string, string>;
  /** The endpoints on which it answered as expected when probed: small JSON answers, and streams. */
  answers: Set<RouteName>;
  streams: Set<RouteName>;
}

interface StreamFigures {
  ttfbP50: number;
  relayP50: number;
  cpuMicros: number;
}

/** The calls made one at a time: their latency (ms), and when they were made (ms since the epoch). */
interface OneAtATime {
  p50: number;
  p99: number;
  since: number;
  until: number;
  /** A reference server's own time per call, from its usage records (`latency_ms - upstream_ms`), filled in after the rounds. */
  own?: { p50: number; p99: number };
}

/** One case on one endpoint in one round. */
interface Figures {
  load: LoadResult;
  one: OneAtATime;
  stream?: StreamFigures;
  failures: number;
}

interface Held {
  idleRss: number;
  peakRss: number;
  opened: number;
}

const json = { 'content-type': 'application/json' };

// ---- the cases --------------------------------------------------------------------------------

/** The catalog; the embeddings model only when its route runs (a build from before embeddings refuses it). */
function catalogConfig(mock: Service, embeddings: boolean) {
  return {
    providers: [
      { id: 'mock-openai', kind: 'openai', baseURL: `${mock.url}/v1` },
      { id: 'mock-anthropic', kind: 'anthropic', baseURL: mock.url },
    ],
    models: [
      { id: 'bench-gpt', provider: 'mock-openai', upstreamModel: UPSTREAM_MODELS['bench-gpt'] },
      { id: 'bench-claude', provider: 'mock-anthropic', upstreamModel: UPSTREAM_MODELS['bench-claude'] },
      ...(embeddings ? [{ id: 'bench-embed', provider: 'mock-openai', upstreamModel: UPSTREAM_MODELS['bench-embed'], type: 'embeddings' }] : []),
    ],
  };
}

/** A client's headers: the key as the Anthropic SDK sends it on Messages, as the OpenAI SDK does elsewhere. */
function clientHeaders(key: string) {
  return (r: Route): Record<string, string> =>
    r.provider === 'anthropic' ? { ...json, 'x-api-key': key, 'anthropic-version': '2023-06-01' } : { ...json, authorization: `Bearer ${key}` };
}

/** What a checkout's bench/lib/gateway.ts gives: this one's, or BENCH_BASELINE's. */
type Gateways = Pick<typeof thisCheckout, 'createDeployment'>;

/** A reference-server case with `modelLimits` and METRICS_PORT: what the build did with them is checked from the outside. */
interface EverythingOn {
  c: Case;
  metricsPort: number;
}

const REFERENCE_NAMES: Record<ReferenceKind, string> = {
  gateway: 'reference server, modelLimits + METRICS_PORT',
  'gateway-plain': 'reference server, no modelLimits, no METRICS_PORT',
  tracing: 'reference server, modelLimits + METRICS_PORT + traces',
  postgres: 'reference server, PostgreSQL + Redis, modelLimits + METRICS_PORT',
  'cache-hit': 'reference server, modelLimits + METRICS_PORT, every call a cache hit',
};

/**
 * The reference server of one checkout as a user starts it (`asUser`: dist/, the log to a pipe),
 * one key made with the CLI. Every kind but `gateway-plain` sets `modelLimits` in GATEWAY_CONFIG
 * (generous: every call counted and checked, none refused; in memory, or on Redis for `postgres`)
 * and METRICS_PORT; `tracing` adds OTEL_EXPORTER_OTLP_ENDPOINT (the sink). A build that refuses
 * `modelLimits` runs without it, said in the notes.
 */
async function referenceCase(
  gateways: Gateways,
  kind: ReferenceKind,
  context: { mock: Service; sink: Service | undefined; deployments: Deployment[]; notes: string[]; embeddings: boolean },
): Promise<{ c: Case; everything?: EverythingOn }> {
  const baseline = gateways !== thisCheckout;
  const { mock, sink, deployments, notes, embeddings } = context;
  const database = kind === 'postgres' ? 'postgres' : 'sqlite';
  const redis = kind === 'postgres';
  const config = catalogConfig(mock, embeddings);
  const limited = kind !== 'gateway-plain';
  let deployment = await gateways.createDeployment({
    database,
    redis,
    asUser: true,
    config: limited ? { ...config, modelLimits: { requestsPerMinute: RPM, tokensPerMinute: TPM } } : config,
  });
  deployments.push(deployment);
  let key: string;
  try {
    ({ key } = await deployment.createKey(ACCOUNT));
  } catch (err) {
    if (!limited || !String(err).includes('modelLimits')) throw err;
    notes.push(`**${REFERENCE_NAMES[kind]}${baseline ? ' (baseline)' : ''}: this build refuses \`modelLimits\` in GATEWAY_CONFIG: run without it**`);
    deployment = await gateways.createDeployment({ database, redis, asUser: true, config });
    deployments.push(deployment);
    ({ key } = await deployment.createKey(ACCOUNT));
  }
  const env: Record<string, string> = {};
  const metricsPort = limited ? await freePort() : 0;
  if (limited) env.METRICS_PORT = String(metricsPort);
  if (kind === 'tracing' && sink) env.OTEL_EXPORTER_OTLP_ENDPOINT = sink.url;
  const headers = clientHeaders(key);
  const cached = (r: Route) => ({ ...headers(r), 'cache-control': 'max-age=86400' });
  const c = newCase(kind, REFERENCE_NAMES[kind], await deployment.serve({ env }), kind === 'cache-hit' ? cached : headers, baseline, deployment);
  return limited ? { c, everything: { c, metricsPort } } : { c };
}

const newCase = (kind: CaseKind, name: string, service: Service, headers: Case['headers'], baseline = false, deployment?: Deployment): Case => ({
  kind,
  baseline,
  name: baseline ? `${name} (baseline)` : name,
  service,
  ...(deployment && { deployment }),
  headers,
  answers: new Set(),
  streams: new Set(),
});

/**
 * BENCH_BASELINE's bench/lib/gateway.ts, if set. Loaded before this process pins itself to the load
 * core: its modules decide whether to pin the servers from the cores they see when they load.
 */
async function baselineGateways(): Promise<Gateways | undefined> {
  const baselineDir = process.env.BENCH_BASELINE;
  return baselineDir ? ((await import(pathToFileURL(join(baselineDir, 'bench', 'lib', 'gateway.ts')).href)) as Gateways) : undefined;
}

/** Starts every case asked for (BENCH_PROXY_CASES), straight to the mock first, each baseline case right before its own. */
async function startCases(
  mock: Service,
  baseline: Gateways | undefined,
  started: { services: Service[]; deployments: Deployment[]; embeddings: boolean },
  notes: string[],
): Promise<{ cases: Case[]; everything: EverythingOn[] }> {
  const { services, deployments, embeddings } = started;
  const cases = [newCase('direct', 'straight to the mock upstream', mock, () => ({ ...json, authorization: `Bearer ${MOCK_KEY}` }))];
  const everything: EverythingOn[] = [];
  const kinds = chosen('BENCH_PROXY_CASES', CASE_KINDS, DEFAULT_CASES);
  let sink: Service | undefined;
  if (kinds.includes('tracing')) {
    sink = await startOtlpSink();
    services.push(sink);
  }
  for (const kind of kinds) {
    if (kind === 'bare' || kind === 'bare-pipe') {
      const answers = kind === 'bare' ? 'parse' : 'pipe';
      const service = await startBareProxy(mock.url, UPSTREAM_MODELS, answers);
      services.push(service);
      const name = kind === 'bare' ? 'floor: bare Koa + undici Pool, answer parsed' : 'bare Koa + undici Pool, answer piped unparsed';
      cases.push(newCase(kind, name, service, () => json));
    } else if (kind === 'hit-floor') {
      const key = `sk-floor-${randomUUID()}`;
      const service = await startHitFloor(mock.url, UPSTREAM_MODELS, key);
      services.push(service);
      const headers = clientHeaders(key);
      cases.push(
        newCase(kind, 'floor for a hit: bare Koa, key, limit, cache key, usage row, log line, metrics', service, (r) => ({
          ...headers(r),
          'cache-control': 'max-age=86400',
        })),
      );
    } else if (isReference(kind)) {
      for (const gateways of baseline ? [baseline, thisCheckout] : [thisCheckout]) {
        const reference = await referenceCase(gateways, kind, { mock, sink, deployments, notes, embeddings });
        cases.push(reference.c);
        if (reference.everything) everything.push(reference.everything);
      }
    } else {
      let service: Service;
      try {
        service = await startPortkey();
      } catch (err) {
        notes.push(`**Portkey's gateway left out: ${String(err).split('\n')[0]}**`);
        continue;
      }
      services.push(service);
      // Told per request which provider to speak and where it is (its x-portkey-custom-host header).
      const headers = (r: Route) => ({
        ...json,
        'x-portkey-provider': r.provider,
        'x-portkey-custom-host': `${mock.url}/v1`,
        ...(r.provider === 'anthropic' ? { 'x-api-key': MOCK_KEY, 'anthropic-version': '2023-06-01' } : { authorization: `Bearer ${MOCK_KEY}` }),
      });
      cases.push(newCase(kind, `Portkey's gateway ${PORTKEY_VERSION} (Node)`, service, headers));
    }
  }
  return { cases, everything };
}

// ---- the clients ------------------------------------------------------------------------------

interface Answer {
  status: number;
  text: string;
  headers: Record<string, unknown>;
  firstByteMs: number;
  totalMs: number;
}

/** One call with undici's Client; resolves once the body has been read whole. */
async function call(client: Client, path: string, headers: Record<string, string>, body: Buffer): Promise<Answer> {
  const started = process.hrtime.bigint();
  const elapsed = () => Number(process.hrtime.bigint() - started) / 1e6;
  const response = await client.request({ path, method: 'POST', headers, body });
  let firstByteMs = Number.NaN;
  let text = '';
  for await (const chunk of response.body as AsyncIterable<Buffer>) {
    if (Number.isNaN(firstByteMs)) firstByteMs = elapsed();
    text += chunk.toString();
  }
  return { status: response.statusCode, text, headers: response.headers, firstByteMs, totalMs: elapsed() };
}

const deltas = (r: Route, text: string) => text.match(r.delta)?.length ?? 0;

/** A keep-alive connection to the case, closed after `use`. */
async function connected<T>(c: Case, use: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client(c.service.url, { pipelining: 1 });
  try {
    return await use(client);
  } finally {
    await client.close();
  }
}

/** Sends one call and one stream on every endpoint; says why it leaves out those not answered as expected. */
async function probe(c: Case, routes: Route[], notes: string[]): Promise<void> {
  await connected(c, async (client) => {
    for (const r of routes) {
      if (c.kind === 'portkey' && r.translated) continue;
      const answer = await call(client, r.path, c.headers(r), r.json);
      if (answer.status !== 200) {
        notes.push(`${c.name}: ${r.path} left out: it answered ${answer.status} ${answer.text.slice(0, 160)}`);
        continue;
      }
      c.answers.add(r.name);
      if (r.stream === undefined) continue;
      const streamed = await call(client, r.path, c.headers(r), streamBody(c, r));
      const relayed = deltas(r, streamed.text);
      if (streamed.status === 200 && relayed === STREAM_EVENTS) c.streams.add(r.name);
      else
        notes.push(`${c.name}: ${r.path} streams left out: ${streamed.status}, ${relayed} of ${STREAM_EVENTS} deltas relayed ${streamed.text.slice(0, 160)}`);
    }
  });
  if (c.kind === 'direct' && c.streams.size < routes.filter((r) => r.stream !== undefined).length)
    throw new Error(`bench: the mock upstream does not answer as it should: ${notes.join('; ')}`);
}

/** Requests one at a time over one keep-alive connection: latency percentiles (ms), and when. */
function oneAtATime(c: Case, r: Route): Promise<OneAtATime & { failures: number }> {
  return connected(c, async (client) => {
    const headers = c.headers(r);
    for (let index = 0; index < Math.ceil(ONE_AT_A_TIME / 10); index++) await call(client, r.path, headers, r.json);
    const samples: number[] = [];
    let failures = 0;
    const since = Date.now();
    for (let index = 0; index < ONE_AT_A_TIME; index++) {
      const answer = await call(client, r.path, headers, r.json);
      if (answer.status !== 200) failures++;
      samples.push(answer.totalMs);
    }
    const { p50, p99 } = percentiles(samples);
    return { p50, p99, since, until: Date.now(), failures };
  });
}

/**
 * A reference server's own time per call one at a time, from the usage records it wrote of them:
 * from the call's arrival at the metering middleware to its end, less the upstream's part. Free of
 * the mock's and the client's noise that the added latency carries.
 */
async function ownTimes(c: Case, r: Route, runs: Figures[]): Promise<void> {
  if (c.deployment === undefined) return;
  const knex = c.deployment.knex();
  for (const { one } of runs) {
    const rows = (await knex('kmg_usage').where('endpoint', r.path).whereBetween('time', [one.since, one.until]).select('latency_ms', 'upstream_ms')) as Array<{
      latency_ms: number;
      upstream_ms: number | null;
    }>;
    if (rows.length > 0) one.own = percentiles(rows.map((row) => row.latency_ms - (row.upstream_ms ?? 0)));
  }
}

/** The streamed body of an endpoint that streams, as case `c` sends it. */
function streamBody(c: Case, r: Route): Buffer {
  const body = c.kind === 'cache-hit' ? r.cachedStream : r.stream;
  if (body === undefined) throw new Error(`bench: ${r.path} never streams`);
  return body;
}

/** 1,000-event streams one at a time over one keep-alive connection: first byte, last byte, server CPU per stream. */
function relay(c: Case, r: Route): Promise<StreamFigures & { failures: number }> {
  return connected(c, async (client) => {
    const headers = c.headers(r);
    const stream = streamBody(c, r);
    await call(client, r.path, headers, stream);
    const firstBytes: number[] = [];
    const totals: number[] = [];
    let failures = 0;
    const cpuBefore = cpuMicros(c.service.pid);
    for (let index = 0; index < STREAMS; index++) {
      const answer = await call(client, r.path, headers, stream);
      if (answer.status !== 200 || deltas(r, answer.text) !== STREAM_EVENTS) failures++;
      firstBytes.push(answer.firstByteMs);
      totals.push(answer.totalMs);
    }
    const cpu = (cpuMicros(c.service.pid) - cpuBefore) / STREAMS;
    return { ttfbP50: percentiles(firstBytes).p50, relayP50: percentiles(totals).p50, cpuMicros: cpu, failures };
  });
}

/** Opens HELD_STREAMS streams at once, the mock holding each after its opening events; the server's peak RSS until all are open and a moment after. */
async function holdStreams(c: Case, r: Route, mock: Service): Promise<Held> {
  const idleRss = memory(c.service.pid).rss;
  await configureMock(mock, { hold: true });
  const pool = new Pool(c.service.url, { connections: HELD_STREAMS });
  const rss = sampleRss(c.service.pid);
  const signal = AbortSignal.timeout(HOLD_TIMEOUT_MS);
  setMaxListeners(HELD_STREAMS + 1, signal);
  const ends: Promise<unknown>[] = [];
  const open = async () => {
    const { statusCode, body } = await pool.request({ path: r.path, method: 'POST', headers: c.headers(r), body: streamBody(c, r), signal });
    const firstEvent = new Promise((resolve, reject) => {
      body.once('data', resolve);
      body.once('error', reject);
      body.once('end', () => reject(new Error('the stream ended before its first event')));
    });
    body.resume();
    ends.push(finished(body).catch(() => undefined));
    await firstEvent;
    return statusCode === 200;
  };
  try {
    const opened = await Promise.allSettled(Array.from({ length: HELD_STREAMS }, open));
    // A moment with every stream open, sampled; then they are let go.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const peakRss = rss.stop();
    await configureMock(mock, { hold: false });
    await Promise.all(ends);
    return { idleRss, peakRss, opened: opened.filter((result) => result.status === 'fulfilled' && result.value).length };
  } finally {
    rss.stop();
    await configureMock(mock, { hold: false });
    await pool.destroy();
  }
}

// ---- what the everything-on build turned on ---------------------------------------------------

/** What the everything-on server actually does, found from the outside: limit headers, a metrics listener. */
async function everythingOnNotes({ c, metricsPort }: EverythingOn): Promise<string[]> {
  const chat = ROUTES[0] as Route;
  const answer = await connected(c, (client) => call(client, chat.path, c.headers(chat), chat.json));
  const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(2000) }).then(
    (response) => response.ok,
    () => false,
  );
  return [
    'x-ratelimit-limit-requests' in answer.headers
      ? `${c.name}: model limits enforced (x-ratelimit-* headers on the answers)`
      : `**${c.name}: no x-ratelimit-* headers: this build does not enforce model limits yet**`,
    metrics ? `${c.name}: metrics served on METRICS_PORT` : `**${c.name}: nothing on METRICS_PORT: this build serves no metrics yet**`,
  ];
}

/** How many usage records the deployment holds (`usage --json`). */
async function usageNote({ c }: EverythingOn): Promise<string> {
  const deployment = c.deployment as Deployment;
  try {
    const report = JSON.parse(await deployment.cli(['usage', '--json'])) as { totals?: { requests?: number } };
    const requests = report.totals?.requests ?? 0;
    return requests > 0
      ? `${c.name}: metering on (${num(requests)} usage records written)`
      : `**${c.name}: no usage records: this build does not meter model calls yet**`;
  } catch (err) {
    return `**${c.name}: usage --json failed: ${String(err).split('\n')[0]}**`;
  }
}

// ---- the report -------------------------------------------------------------------------------

interface Row {
  route: Route;
  c: Case;
  runs: Figures[];
  /** Straight to the mock, the same rounds. */
  direct: Figures[];
}

type Figure = (run: Figures) => number | undefined;

/** A figure in every round (NaN where a round has none). */
const rounds = (runs: Figures[], figure: Figure): number[] => runs.map((run) => figure(run) ?? Number.NaN);

/** A figure of `row` divided by the same figure of `base` in the same round, round by round. */
function ratios(row: Row | undefined, base: Row | undefined, figure: Figure): number[] {
  if (!row || !base) return [];
  return row.runs.map((run, index) => (figure(run) ?? Number.NaN) / (figure(base.runs[index] as Figures) ?? Number.NaN));
}

/** Round by round ratios (to the baseline's case, or another case, of the same round), with their median: the rounds pair the two, so a drift of the machine moves both. */
function withMedian(values: number[]): string {
  if (values.length === 0 || !values.every(Number.isFinite)) return '—';
  return `${spread(values, times)} (median ${times(median(values))})`;
}

/** A figure of `row` less the direct call's in the same round, round by round. */
function added(row: Row, figure: Figure): number[] {
  return row.runs.map((run, index) => (figure(run) ?? Number.NaN) - (figure(row.direct[index] as Figures) ?? Number.NaN));
}

/** Whether a target is met: a spread counts only when every round is on the same side of it, and one round is no spread. */
function verdict(values: number[], met: (value: number) => boolean): string {
  if (values.length === 0 || !values.every(Number.isFinite)) return '—';
  if (values.length === 1) return `${met(values[0] as number) ? 'met' : 'missed'} in the one round: does not count`;
  if (values.every(met)) return 'met';
  if (!values.some(met)) return '**missed**';
  return 'does not count (the spread crosses the target)';
}

const whole = (value: number) => num(value);
const micros = (ms: number) => num(ms * 1000);
const times = (value: number) => `${value.toFixed(2)}x`;
const rps: Figure = (run) => run.load.requestsPerSecond;
const cpu: Figure = (run) => run.load.cpuMicrosPerRequest;
const streamCpu: Figure = (run) => run.stream?.cpuMicros;
const endpoint = (r: Route) => (r.translated ? `${r.path} → Messages provider` : r.path);

/** The tables; the targets are on chat (and messages, translated and the stream beside it), the held streams on the first endpoint measured. */
function report(rows: Row[], held: Map<Case, Held>, first: Route): string[] {
  const find = (name: RouteName, kind: CaseKind, baseline = false) =>
    rows.find((row) => row.route.name === name && row.c.kind === kind && row.c.baseline === baseline);
  const floor = (row: Row) => find(row.route.name, 'bare');
  const isDirect = (row: Row) => row.c.kind === 'direct';
  const serverOnly = (row: Row, text: () => string) => (isDirect(row) ? '—' : text());
  const answers = rows.filter((row) => row.c.answers.has(row.route.name));
  const streams = rows.filter((row) => row.c.streams.has(row.route.name));
  const lines = [
    'Small JSON answers (each figure: lowest–highest over the rounds):',
    '',
    table(answers, [
      { heading: 'endpoint', cell: (row) => endpoint(row.route) },
      { heading: 'case', cell: (row) => row.c.name },
      { heading: 'req/s', cell: (row) => spread(rounds(row.runs, rps), whole), align: 'right' },
      { heading: 'vs Portkey', cell: (row) => spread(ratios(row, find(row.route.name, 'portkey'), rps), times), align: 'right' },
      {
        heading: 'p99 ms',
        cell: (row) =>
          spread(
            rounds(row.runs, (run) => run.load.p99),
            (value) => num(value, 1),
          ),
        align: 'right',
      },
      { heading: 'server CPU µs/call', cell: (row) => serverOnly(row, () => spread(rounds(row.runs, cpu), whole)), align: 'right' },
      { heading: 'vs floor', cell: (row) => serverOnly(row, () => spread(ratios(row, floor(row), cpu), times)), align: 'right' },
      ...(rows.some((row) => row.c.baseline)
        ? [
            {
              heading: 'CPU vs baseline',
              cell: (row: Row) => withMedian(ratios(row, row.c.baseline ? undefined : find(row.route.name, row.c.kind, true), cpu)),
              align: 'right' as const,
            },
          ]
        : []),
      {
        heading: 'c=1 added p50 µs',
        cell: (row) =>
          serverOnly(row, () =>
            spread(
              added(row, (run) => run.one.p50),
              micros,
            ),
          ),
        align: 'right',
      },
      {
        heading: 'c=1 added p99 µs',
        cell: (row) =>
          serverOnly(row, () =>
            spread(
              added(row, (run) => run.one.p99),
              micros,
            ),
          ),
        align: 'right',
      },
      {
        heading: 'own p50 µs',
        cell: (row) =>
          row.c.deployment
            ? spread(
                rounds(row.runs, (run) => run.one.own?.p50),
                micros,
              )
            : '—',
        align: 'right',
      },
      { heading: 'unexpected', cell: (row) => num(row.runs.reduce((sum, run) => sum + run.failures, 0)), align: 'right' },
    ]),
    '',
    `Streams of ${num(STREAM_EVENTS)} events, one at a time (the mock yields to its event loop between two events):`,
    '',
    table(streams, [
      { heading: 'endpoint', cell: (row) => endpoint(row.route) },
      { heading: 'case', cell: (row) => row.c.name },
      {
        heading: 'first byte added µs',
        cell: (row) =>
          serverOnly(row, () =>
            spread(
              added(row, (run) => run.stream?.ttfbP50),
              micros,
            ),
          ),
        align: 'right',
      },
      {
        heading: 'all relayed added ms',
        cell: (row) =>
          serverOnly(row, () =>
            spread(
              added(row, (run) => run.stream?.relayP50),
              (value) => num(value, 1),
            ),
          ),
        align: 'right',
      },
      { heading: 'server CPU µs/stream', cell: (row) => serverOnly(row, () => spread(rounds(row.runs, streamCpu), whole)), align: 'right' },
      { heading: 'vs floor', cell: (row) => serverOnly(row, () => spread(ratios(row, floor(row), streamCpu), times)), align: 'right' },
    ]),
  ];
  const heldRows = [...held].map(([c, figures]) => ({ name: c.name, figures }));
  if (heldRows.length > 0) {
    lines.push(
      '',
      `${num(HELD_STREAMS)} ${first.path} streams open at once, each held by the mock after its opening events (measured before the rounds):`,
      '',
      table(heldRows, [
        { heading: 'case', cell: (row) => row.name },
        { heading: 'RSS before', cell: (row) => mib(row.figures.idleRss), align: 'right' },
        { heading: 'peak RSS', cell: (row) => mib(row.figures.peakRss), align: 'right' },
        { heading: 'KiB per stream', cell: (row) => num((row.figures.peakRss - row.figures.idleRss) / 1024 / HELD_STREAMS), align: 'right' },
        { heading: 'streams opened', cell: (row) => num(row.figures.opened), align: 'right' },
      ]),
    );
  }

  const targets = rows
    .filter((row) => row.route.name === 'chat' && isReference(row.c.kind))
    .flatMap((chat) => {
      const { kind, baseline } = chat.c;
      // `once`: a figure measured once, before the rounds (the held streams' RSS), not once a round.
      const target = (name: string, values: number[], format: (value: number) => string, met?: (value: number) => boolean, once = false) => ({
        name: chat.c.name,
        target: name,
        result: spread(values, format),
        met: !met ? '—' : once && values.length === 1 ? (met(values[0] as number) ? 'met' : '**missed**') : verdict(values, met),
      });
      const messages = find('messages', kind, baseline);
      const translated = find('translated', kind, baseline);
      const rss = held.get(chat.c);
      const peak = rss && rss.opened === HELD_STREAMS ? [rss.peakRss] : [];
      if (kind === 'tracing') {
        // Traces cost what exporting every span costs: measured beside the same server without them, no target.
        return [target('traces on: CPU per chat call vs the same server without traces', ratios(chat, find('chat', 'gateway', baseline), cpu), times)];
      }
      if (kind === 'cache-hit') {
        // Issue 49: a hit sends nothing upstream, so it must cost less than the floor's proxied call.
        // Beside it, the floor for a hit, which does only what the spec asks of one. With medians: the rounds pair the cases.
        const hitFloor = find('chat', 'hit-floor');
        const paired = (name: string, values: number[], met?: (value: number) => boolean) => ({
          ...target(name, values, times, met),
          result: withMedian(values),
        });
        return [
          paired('cache hit: CPU per chat call < the floor', ratios(chat, floor(chat), cpu), (value) => value < 1),
          ...(hitFloor
            ? [
                paired('cache hit: CPU per chat call vs the floor for a hit', ratios(chat, hitFloor, cpu)),
                { ...paired('the floor for a hit: CPU per chat call vs the floor', ratios(hitFloor, floor(hitFloor), cpu)), name: hitFloor.c.name },
              ]
            : []),
        ];
      }
      return [
        target('server CPU per chat call ≤ 2x the floor', ratios(chat, floor(chat), cpu), times, (value) => value <= 2),
        target("req/s ≥ 6x Portkey's", ratios(chat, find('chat', 'portkey'), rps), times, (value) => value >= 6),
        target(
          'added latency at c=1: p50 ≤ 200 µs',
          added(chat, (run) => run.one.p50),
          micros,
          (value) => value <= 0.2,
        ),
        target(
          'added latency at c=1: p99 ≤ 1 ms',
          added(chat, (run) => run.one.p99),
          micros,
          (value) => value <= 1,
        ),
        target('/v1/messages: CPU per call ≤ 2.2x the floor', ratios(messages, messages && floor(messages), cpu), times, (value) => value <= 2.2),
        target('streamed chat: CPU per stream ≤ 2.2x the floor piping it', ratios(chat, floor(chat), streamCpu), times, (value) => value <= 2.2),
        target('translated call: CPU ≤ 1.5x the native chat call', ratios(translated, chat, cpu), times, (value) => value <= 1.5),
        ...(HELD_STREAMS > 0 ? [target(`${num(HELD_STREAMS)} streams open < 256 MiB RSS`, peak, mib, (value) => value < 256 * 1_048_576, true)] : []),
      ];
    });
  if (targets.length > 0) {
    lines.push(
      '',
      'Targets (issue 34), round by round (`n/a`: not measured in this run):',
      '',
      table(targets, [
        { heading: 'case', cell: (row) => row.name },
        { heading: 'target', cell: (row) => row.target },
        { heading: 'over the rounds', cell: (row) => row.result, align: 'right' },
        { heading: 'met?', cell: (row) => row.met },
      ]),
    );
  }
  return lines;
}

// ---- the run ----------------------------------------------------------------------------------

/** The cases in the order of one round: each baseline case first in odd rounds, second in even ones. */
function inRound(cases: Case[], round: number): Case[] {
  const ordered = [...cases];
  if (round % 2 === 1) return ordered;
  for (let index = 0; index < ordered.length - 1; index++) {
    const c = ordered[index] as Case;
    if (!c.baseline) continue;
    ordered[index] = ordered[index + 1] as Case;
    ordered[index + 1] = c;
    index++;
  }
  return ordered;
}

/**
 * The event splitter of this checkout (and of BENCH_BASELINE's), on one event of 20 MB in 64 KiB
 * chunks, round by round: wall and CPU milliseconds to the event, in this process.
 */
export async function largeEvent(): Promise<string[]> {
  const splitters: Array<[string, new () => { push(chunk: Buffer): string[] }]> = [['this checkout', EventSplitter]];
  const baselineDir = process.env.BENCH_BASELINE;
  if (baselineDir) {
    const module = (await import(pathToFileURL(join(baselineDir, 'lib', 'http', 'server-sent-events.ts')).href)) as { EventSplitter: new () => EventSplitter };
    splitters.push(['baseline', module.EventSplitter]);
  }
  const event = Buffer.from(`data: {"text":"${'a'.repeat(LARGE_EVENT_BYTES)}"}\n\n`);
  const figures = new Map<string, Array<{ wall: number; cpu: number }>>(splitters.map(([name]) => [name, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, Splitter] of round % 2 === 1 ? splitters : [...splitters].reverse()) {
      process.stderr.write(`proxy: round ${round}/${ROUNDS}: one ${num(LARGE_EVENT_BYTES)}-byte event: ${name}\n`);
      const splitter = new Splitter();
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      let events = 0;
      for (let start = 0; start < event.length; start += SOCKET_CHUNK_BYTES) events += splitter.push(event.subarray(start, start + SOCKET_CHUNK_BYTES)).length;
      const wall = performance.now() - started;
      const cpu = process.cpuUsage(cpuBefore);
      if (events !== 1) throw new Error(`bench: the ${name} splitter found ${events} events in one`);
      figures.get(name)?.push({ wall, cpu: (cpu.user + cpu.system) / 1000 });
    }
  }
  return [
    `### One upstream event of ${num(LARGE_EVENT_BYTES / 1_000_000)} MB, in ${num(SOCKET_CHUNK_BYTES / 1024)} KiB chunks, through the event splitter (this process, ${ROUNDS} rounds)`,
    '',
    table(splitters, [
      { heading: 'splitter', cell: ([name]) => name },
      {
        heading: 'ms to the event',
        cell: ([name]) =>
          spread(
            (figures.get(name) ?? []).map((run) => run.wall),
            (value) => num(value),
          ),
        align: 'right',
      },
      {
        heading: 'CPU ms',
        cell: ([name]) =>
          spread(
            (figures.get(name) ?? []).map((run) => run.cpu),
            (value) => num(value),
          ),
        align: 'right',
      },
    ]),
  ];
}

export async function proxy(): Promise<string> {
  const baseline = await baselineGateways();
  const splitting = await largeEvent();
  becomeLoadGenerator();
  const routes = chosen(
    'BENCH_PROXY_ROUTES',
    ROUTES.map((r) => r.name),
    DEFAULT_ROUTES,
  ).map((name) => ROUTES.find((r) => r.name === name) as Route);
  const services: Service[] = [];
  const deployments: Deployment[] = [];
  const notes: string[] = [];
  try {
    const mock = await startMockUpstream(STREAM_EVENTS);
    services.push(mock);
    const { cases, everything } = await startCases(mock, baseline, { services, deployments, embeddings: routes.some((r) => r.name === 'embeddings') }, notes);
    for (const c of cases) await probe(c, routes, notes);
    for (const started of everything) notes.push(...(await everythingOnNotes(started)));

    // Before the rounds, while each gateway holds no more than its start-up and the probe's calls:
    // what the open streams themselves take.
    const first = routes[0] as Route;
    const held = new Map<Case, Held>();
    for (const c of HELD_STREAMS > 0 ? cases : []) {
      if (c.kind === 'direct' || !c.streams.has(first.name)) continue;
      process.stderr.write(`proxy: ${num(HELD_STREAMS)} streams held open: ${c.name}\n`);
      held.set(c, await holdStreams(c, first, mock));
    }

    const runs = new Map<string, Figures[]>();
    const runsOf = (c: Case, r: Route): Figures[] => {
      const key = `${c.name} ${r.name}`;
      const list = runs.get(key) ?? [];
      runs.set(key, list);
      return list;
    };
    for (let round = 1; round <= ROUNDS; round++) {
      for (const r of routes) {
        for (const c of inRound(cases, round)) {
          if (!c.answers.has(r.name)) continue;
          process.stderr.write(`proxy: round ${round}/${ROUNDS}: ${r.path}: ${c.name}\n`);
          const loaded = await load({
            url: `${c.service.url}${r.path}`,
            method: 'POST',
            headers: c.headers(r),
            body: r.json,
            connections: CONNECTIONS,
            expectStatus: 200,
            pid: c.service.pid,
          });
          const one = await oneAtATime(c, r);
          const stream = c.streams.has(r.name) ? await relay(c, r) : undefined;
          runsOf(c, r).push({ load: loaded, one, ...(stream && { stream }), failures: loaded.failures + one.failures + (stream?.failures ?? 0) });
        }
      }
    }

    for (const started of everything) notes.push(await usageNote(started));
    // The records of the last calls are written within the recorder's flush interval (1 s).
    await new Promise((resolve) => setTimeout(resolve, 1500));
    for (const r of routes) for (const c of cases) await ownTimes(c, r, runsOf(c, r));

    const direct = cases[0] as Case;
    const rows: Row[] = routes.flatMap((r) =>
      cases.filter((c) => c.answers.has(r.name)).map((c) => ({ route: r, c, runs: runsOf(c, r), direct: runsOf(direct, r) })),
    );
    return [
      `## Proxy (${CONNECTIONS} connections, ${DURATION} s per run after ${WARMUP} s, ${ROUNDS} interleaved rounds; one at a time: ${num(ONE_AT_A_TIME)} requests, ${num(STREAMS)} streams per round; ${PINNING ? 'servers on core 0, load, mock upstream and OTLP sink on core 1' : 'not pinned'})`,
      machine(),
      'Reference server as a user starts it: `node dist/reference-server/cli.js serve`, LOG_LEVEL=info to a pipe, embedded default (SQLite) unless the case names PostgreSQL, one key from `keys create`.',
      ...(process.env.BENCH_BASELINE
        ? [`Baseline: the reference server of ${process.env.BENCH_BASELINE}, each of its cases run beside the same case of this checkout.`]
        : []),
      ...notes.map((note) => `- ${note}`),
      '',
      ...report(rows, held, first),
      '',
      ...splitting,
    ].join('\n');
  } finally {
    await Promise.all(services.map((service) => service.stop()));
    for (const deployment of deployments) await deployment.destroy();
  }
}

if (isMain(import.meta.url)) console.log(await proxy());
