/**
 * Proxy: what a gateway adds to a model call (issue 18). A mock provider (bench/servers/mock-upstream.ts,
 * on the load core) answers Chat Completions, Messages and the Responses API; in front of it, in
 * one run, interleaved: nothing (straight to the mock), the bare floor (Koa + an undici Pool,
 * parsing the body and rewriting `model`), the reference server on the embedded default and on
 * PostgreSQL + Redis with everything on (metering, model limits, metrics, the request log), and
 * Portkey's gateway (fetched into a cache on first use). Per case and endpoint: req/s, latency and
 * server CPU per request at 50 connections; latency one request at a time over a keep-alive
 * connection, minus the mock's own, and each reference server's own time per call from its usage
 * records; streams of 1,000 events relayed one at a time (time to first byte, time to the last).
 * Before the rounds, the peak RSS of each gateway holding 1,000 streams open.
 * BENCH_BASELINE=<another checkout> adds its reference-server cases, marked "(baseline)", each run
 * right beside the same case of this checkout, first in odd rounds and second in even ones: a
 * before/after comparison in one run (as bench/overhead.ts).
 * Run: node --import tsx bench/proxy.ts
 */
import { setMaxListeners } from 'node:events';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { Client, Pool } from 'undici';
import * as thisCheckout from './lib/gateway.js';
import type { Deployment } from './lib/gateway.js';
import { DURATION, load, median, percentiles, WARMUP, type LoadResult } from './lib/load.js';
import { freePort, isMain, type Service } from './lib/processes.js';
import { configureMock, PORTKEY_VERSION, startBareProxy, startMockUpstream, startPortkey } from './lib/proxies.js';
import { becomeLoadGenerator, cpuMicros, machine, memory, PINNING, sampleRss } from './lib/system.js';
import { mib, num, ratio, table } from './lib/table.js';

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
// Generous limits: every call is counted and checked, none refused.
const RPM = 1_000_000_000;
const TPM = 1_000_000_000_000;

type RouteName = 'chat' | 'messages' | 'responses';

interface Route {
  name: RouteName;
  path: string;
  json: Buffer;
  stream: Buffer;
  /** Matches one text delta of the stream, however a gateway re-serialises it. */
  delta: RegExp;
  /** The provider kind behind it: the reference server's and Portkey's. */
  provider: 'openai' | 'anthropic';
}

function route(name: RouteName, path: string, body: Record<string, unknown>, delta: RegExp, provider: Route['provider']): Route {
  return { name, path, json: Buffer.from(JSON.stringify(body)), stream: Buffer.from(JSON.stringify({ ...body, stream: true })), delta, provider };
}

const SAY_HELLO = [{ role: 'user', content: 'Say hello.' }];
const ROUTES: Route[] = [
  route('chat', '/v1/chat/completions', { model: 'bench-gpt', messages: SAY_HELLO, max_tokens: 16 }, /"content":\s*"tok"/g, 'openai'),
  route('messages', '/v1/messages', { model: 'bench-claude', max_tokens: 16, messages: SAY_HELLO }, /"text":\s*"tok"/g, 'anthropic'),
  route('responses', '/v1/responses', { model: 'bench-gpt', input: 'Say hello.', max_output_tokens: 16 }, /"delta":\s*"tok"/g, 'openai'),
];
/** Catalog id → the mock's model name: the reference server's catalog and the bare floor's rewrite. */
const UPSTREAM_MODELS = { 'bench-gpt': 'mock-gpt', 'bench-claude': 'mock-claude' };

/** The names a comma-separated variable lists (all of them when unset), refusing unknown ones. */
function chosen<T extends string>(variable: string, all: readonly T[]): T[] {
  const raw = process.env[variable];
  if (raw === undefined || raw === '') return [...all];
  const names = raw.split(',').map((name) => name.trim());
  const unknown = names.filter((name) => !all.includes(name as T));
  if (unknown.length > 0) throw new Error(`bench: ${variable}: unknown ${unknown.join(', ')} (known: ${all.join(', ')})`);
  return names as T[];
}

const CASE_KINDS = ['bare', 'sqlite', 'postgres', 'portkey'] as const;
type CaseKind = (typeof CASE_KINDS)[number] | 'direct';

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

function catalogConfig(mock: Service) {
  return {
    providers: [
      { id: 'mock-openai', kind: 'openai', baseURL: `${mock.url}/v1` },
      { id: 'mock-anthropic', kind: 'anthropic', baseURL: mock.url },
    ],
    models: [
      { id: 'bench-gpt', provider: 'mock-openai', upstreamModel: UPSTREAM_MODELS['bench-gpt'] },
      { id: 'bench-claude', provider: 'mock-anthropic', upstreamModel: UPSTREAM_MODELS['bench-claude'] },
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

interface EverythingOn {
  /** Its case, as the notes name it. */
  c: Case;
  deployment: Deployment;
  service: Service;
  key: string;
  metricsPort: number;
}

/**
 * The reference server on PostgreSQL + Redis with everything on: model limits for every key
 * (`modelLimits` in GATEWAY_CONFIG) and on the key (`--rpm`, `--tpm`), metrics on METRICS_PORT,
 * the request log. A build that refuses `modelLimits` runs without it; what the build did with
 * the rest is found out from the outside once it runs (`everythingOnNotes`).
 */
async function everythingOn(gateways: Gateways, mock: Service, deployments: Deployment[], notes: string[]): Promise<Omit<EverythingOn, 'c'>> {
  const { createDeployment } = gateways;
  const config = catalogConfig(mock);
  const limitOptions = ['--rpm', String(RPM), '--tpm', String(TPM)];
  let deployment = await createDeployment({ database: 'postgres', redis: true, config: { ...config, modelLimits: { requestsPerMinute: RPM, tokensPerMinute: TPM } } });
  deployments.push(deployment);
  let key: string;
  try {
    ({ key } = await deployment.createKey(ACCOUNT, limitOptions));
  } catch (err) {
    if (!String(err).includes('modelLimits')) throw err;
    notes.push('**PostgreSQL + Redis: this build refuses `modelLimits` in GATEWAY_CONFIG: run without it** (the key keeps its own `--rpm`/`--tpm`)');
    deployment = await createDeployment({ database: 'postgres', redis: true, config });
    deployments.push(deployment);
    ({ key } = await deployment.createKey(ACCOUNT, limitOptions));
  }
  const metricsPort = await freePort();
  const service = await deployment.serve({ env: { METRICS_PORT: String(metricsPort) } });
  return { deployment, service, key, metricsPort };
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

/** The reference-server cases of one checkout: `kind` of it, with its own build and servers. */
async function referenceCases(gateways: Gateways, kind: 'sqlite' | 'postgres', mock: Service, deployments: Deployment[], notes: string[]): Promise<{ c: Case; everything?: EverythingOn }> {
  const baseline = gateways !== thisCheckout;
  if (kind === 'sqlite') {
    const deployment = await gateways.createDeployment({ database: 'sqlite', config: catalogConfig(mock) });
    deployments.push(deployment);
    const { key } = await deployment.createKey(ACCOUNT);
    return { c: newCase(kind, 'reference server, embedded default (SQLite)', await deployment.serve(), clientHeaders(key), baseline, deployment) };
  }
  const started = await everythingOn(gateways, mock, deployments, notes);
  const c = newCase(kind, 'reference server, PostgreSQL + Redis, everything on', started.service, clientHeaders(started.key), baseline, started.deployment);
  return { c, everything: { ...started, c } };
}

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
  started: { services: Service[]; deployments: Deployment[] },
  notes: string[],
): Promise<{ cases: Case[]; everything: EverythingOn[] }> {
  const { services, deployments } = started;
  const cases = [newCase('direct', 'straight to the mock upstream', mock, () => ({ ...json, authorization: `Bearer ${MOCK_KEY}` }))];
  const everything: EverythingOn[] = [];
  for (const kind of chosen('BENCH_PROXY_CASES', CASE_KINDS)) {
    if (kind === 'bare') {
      const service = await startBareProxy(mock.url, UPSTREAM_MODELS);
      services.push(service);
      cases.push(newCase(kind, 'bare Koa + undici Pool.request (floor)', service, () => json));
    } else if (kind === 'sqlite' || kind === 'postgres') {
      for (const gateways of baseline ? [baseline, thisCheckout] : [thisCheckout]) {
        const started = await referenceCases(gateways, kind, mock, deployments, notes);
        cases.push(started.c);
        if (started.everything) everything.push(started.everything);
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
      const answer = await call(client, r.path, c.headers(r), r.json);
      if (answer.status !== 200) {
        notes.push(`${c.name}: ${r.path} left out: it answered ${answer.status} ${answer.text.slice(0, 160)}`);
        continue;
      }
      c.answers.add(r.name);
      const streamed = await call(client, r.path, c.headers(r), r.stream);
      const relayed = deltas(r, streamed.text);
      if (streamed.status === 200 && relayed === STREAM_EVENTS) c.streams.add(r.name);
      else notes.push(`${c.name}: ${r.path} streams left out: ${streamed.status}, ${relayed} of ${STREAM_EVENTS} deltas relayed ${streamed.text.slice(0, 160)}`);
    }
  });
  if (c.kind === 'direct' && c.streams.size < routes.length) throw new Error(`bench: the mock upstream does not answer as it should: ${notes.join('; ')}`);
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
    const rows = (await knex('kmg_usage')
      .where('endpoint', r.path)
      .whereBetween('time', [one.since, one.until])
      .select('latency_ms', 'upstream_ms')) as Array<{ latency_ms: number; upstream_ms: number | null }>;
    if (rows.length > 0) one.own = percentiles(rows.map((row) => row.latency_ms - (row.upstream_ms ?? 0)));
  }
}

/** 1,000-event streams one at a time over one keep-alive connection: first byte, last byte, server CPU per stream. */
function relay(c: Case, r: Route): Promise<StreamFigures & { failures: number }> {
  return connected(c, async (client) => {
    const headers = c.headers(r);
    await call(client, r.path, headers, r.stream);
    const firstBytes: number[] = [];
    const totals: number[] = [];
    let failures = 0;
    const cpuBefore = cpuMicros(c.service.pid);
    for (let index = 0; index < STREAMS; index++) {
      const answer = await call(client, r.path, headers, r.stream);
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
    const { statusCode, body } = await pool.request({ path: r.path, method: 'POST', headers: c.headers(r), body: r.stream, signal });
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
async function usageNote({ c, deployment }: EverythingOn): Promise<string> {
  try {
    const report = JSON.parse(await deployment.cli(['usage', '--json'])) as { totals?: { requests?: number } };
    const requests = report.totals?.requests ?? 0;
    return requests > 0 ? `${c.name}: metering on (${num(requests)} usage records written)` : `**${c.name}: no usage records: this build does not meter model calls yet**`;
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

/** The median over rounds of a figure (NaN where a round has none). */
function pick(runs: Figures[], figure: (run: Figures) => number | undefined): number {
  return median(runs.map((run) => figure(run) ?? Number.NaN));
}

/** The median over rounds of a case's figure minus the direct call's in the same round. */
function added(row: Row, figure: (run: Figures) => number | undefined): number {
  return median(row.runs.map((run, index) => (figure(run) ?? Number.NaN) - (figure(row.direct[index] as Figures) ?? Number.NaN)));
}

const micros = (ms: number) => num(ms * 1000);

/** The tables; the targets and the held streams are on `chat`, the first endpoint measured. */
function report(rows: Row[], held: Map<Case, Held>, chat: Route): string[] {
  const find = (r: Route, kind: CaseKind) => rows.find((row) => row.route === r && row.c.kind === kind && !row.c.baseline);
  const isDirect = (row: Row) => row.c.kind === 'direct';
  const serverOnly = (row: Row, text: () => string) => (isDirect(row) ? '—' : text());
  const rps = (row: Row | undefined) => (row ? pick(row.runs, (run) => run.load.requestsPerSecond) : Number.NaN);
  const cpu = (row: Row | undefined) => (row ? pick(row.runs, (run) => run.load.cpuMicrosPerRequest) : Number.NaN);
  const answers = rows.filter((row) => row.c.answers.has(row.route.name));
  const streams = rows.filter((row) => row.c.streams.has(row.route.name));
  const lines = [
    'Small JSON answers:',
    '',
    table(answers, [
      { heading: 'endpoint', cell: (row) => row.route.path },
      { heading: 'case', cell: (row) => row.c.name },
      { heading: 'req/s', cell: (row) => num(rps(row)), align: 'right' },
      { heading: 'vs Portkey', cell: (row) => ratio(rps(row), rps(find(row.route, 'portkey'))), align: 'right' },
      { heading: 'p50 ms', cell: (row) => num(pick(row.runs, (run) => run.load.p50), 1), align: 'right' },
      { heading: 'p99 ms', cell: (row) => num(pick(row.runs, (run) => run.load.p99), 1), align: 'right' },
      { heading: 'server CPU µs/req', cell: (row) => serverOnly(row, () => num(cpu(row))), align: 'right' },
      { heading: 'CPU vs floor', cell: (row) => serverOnly(row, () => ratio(cpu(row), cpu(find(row.route, 'bare')))), align: 'right' },
      { heading: 'one at a time: p50 µs', cell: (row) => micros(pick(row.runs, (run) => run.one.p50)), align: 'right' },
      { heading: 'p99 µs', cell: (row) => micros(pick(row.runs, (run) => run.one.p99)), align: 'right' },
      { heading: 'added p50 µs', cell: (row) => serverOnly(row, () => micros(added(row, (run) => run.one.p50))), align: 'right' },
      { heading: 'added p99 µs', cell: (row) => serverOnly(row, () => micros(added(row, (run) => run.one.p99))), align: 'right' },
      { heading: 'own p50 µs', cell: (row) => (row.c.deployment ? micros(pick(row.runs, (run) => run.one.own?.p50)) : '—'), align: 'right' },
      { heading: 'own p99 µs', cell: (row) => (row.c.deployment ? micros(pick(row.runs, (run) => run.one.own?.p99)) : '—'), align: 'right' },
      { heading: 'unexpected', cell: (row) => num(row.runs.reduce((sum, run) => sum + run.failures, 0)), align: 'right' },
    ]),
    '',
    `Streams of ${num(STREAM_EVENTS)} events, one at a time (the mock yields to its event loop between two events):`,
    '',
    table(streams, [
      { heading: 'endpoint', cell: (row) => row.route.path },
      { heading: 'case', cell: (row) => row.c.name },
      { heading: 'first byte p50 µs', cell: (row) => micros(pick(row.runs, (run) => run.stream?.ttfbP50)), align: 'right' },
      { heading: 'first byte added µs', cell: (row) => serverOnly(row, () => micros(added(row, (run) => run.stream?.ttfbP50))), align: 'right' },
      { heading: 'all relayed p50 ms', cell: (row) => num(pick(row.runs, (run) => run.stream?.relayP50), 1), align: 'right' },
      { heading: 'added ms', cell: (row) => serverOnly(row, () => num(added(row, (run) => run.stream?.relayP50), 1)), align: 'right' },
      { heading: 'server CPU µs/stream', cell: (row) => serverOnly(row, () => num(pick(row.runs, (run) => run.stream?.cpuMicros))), align: 'right' },
    ]),
  ];
  const heldRows = [...held].map(([c, figures]) => ({ name: c.name, figures }));
  if (heldRows.length > 0) {
    lines.push(
      '',
      `${num(HELD_STREAMS)} ${chat.path} streams open at once, each held by the mock after its opening events (measured before the rounds):`,
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

  const targets = rows.filter((row) => row.route === chat && (row.c.kind === 'sqlite' || row.c.kind === 'postgres')).flatMap((row) => {
    const rss = held.get(row.c);
    const target = (name: string, value: number, text: string, met: (value: number) => boolean) => ({
      name: row.c.name,
      target: name,
      result: Number.isFinite(value) ? text : 'not measured',
      met: Number.isFinite(value) ? (met(value) ? 'met' : '**NOT met**') : '—',
    });
    const cpuRatio = cpu(row) / cpu(find(chat, 'bare'));
    const speed = rps(row) / rps(find(chat, 'portkey'));
    const addedP50 = added(row, (run) => run.one.p50);
    const addedP99 = added(row, (run) => run.one.p99);
    const ttfb = added(row, (run) => run.stream?.ttfbP50);
    const peak = rss && rss.opened === HELD_STREAMS ? rss.peakRss : Number.NaN;
    return [
      target('server CPU per chat completion ≤ 2x the bare floor', cpuRatio, `${cpuRatio.toFixed(2)}x`, (value) => value <= 2),
      target("req/s ≥ 5x Portkey's", speed, `${speed.toFixed(2)}x`, (value) => value >= 5),
      target('added latency one at a time: p50 ≤ 0.3 ms', addedP50, `${num(addedP50, 3)} ms`, (value) => value <= 0.3),
      target('added latency one at a time: p99 ≤ 1 ms', addedP99, `${num(addedP99, 3)} ms`, (value) => value <= 1),
      target('stream: time to first byte added ≤ 1 ms', ttfb, `${num(ttfb, 3)} ms`, (value) => value <= 1),
      ...(HELD_STREAMS > 0 ? [target(`${num(HELD_STREAMS)} streams open < 256 MiB RSS`, peak, mib(peak), (value) => value < 256 * 1_048_576)] : []),
    ];
  });
  if (targets.length > 0) {
    lines.push(
      '',
      `Targets (issue 18), on ${chat.path}:`,
      '',
      table(targets, [
        { heading: 'case', cell: (row) => row.name },
        { heading: 'target', cell: (row) => row.target },
        { heading: 'result', cell: (row) => row.result, align: 'right' },
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

export async function proxy(): Promise<string> {
  const baseline = await baselineGateways();
  becomeLoadGenerator();
  const routes = chosen('BENCH_PROXY_ROUTES', ROUTES.map((r) => r.name)).map((name) => ROUTES.find((r) => r.name === name) as Route);
  const services: Service[] = [];
  const deployments: Deployment[] = [];
  const notes: string[] = [];
  try {
    const mock = await startMockUpstream(STREAM_EVENTS);
    services.push(mock);
    const { cases, everything } = await startCases(mock, baseline, { services, deployments }, notes);
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
          const loaded = await load({ url: `${c.service.url}${r.path}`, method: 'POST', headers: c.headers(r), body: r.json, connections: CONNECTIONS, expectStatus: 200, pid: c.service.pid });
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
    const rows: Row[] = routes.flatMap((r) => cases.filter((c) => c.answers.has(r.name)).map((c) => ({ route: r, c, runs: runsOf(c, r), direct: runsOf(direct, r) })));
    return [
      `## Proxy (${CONNECTIONS} connections, ${DURATION} s per run after ${WARMUP} s, median of ${ROUNDS} interleaved rounds; one at a time: ${num(ONE_AT_A_TIME)} requests, ${num(STREAMS)} streams per round; ${PINNING ? 'servers on core 0, load and mock upstream on core 1' : 'not pinned'})`,
      machine(),
      'Request log on (LOG_LEVEL=info, stdout to /dev/null) in every reference-server case.',
      ...(process.env.BENCH_BASELINE ? [`Baseline: the reference server of ${process.env.BENCH_BASELINE}, each of its cases run beside the same case of this checkout.`] : []),
      ...notes.map((note) => `- ${note}`),
      '',
      ...report(rows, held, first),
    ].join('\n');
  } finally {
    await Promise.all(services.map((service) => service.stop()));
    for (const deployment of deployments) await deployment.destroy();
  }
}

if (isMain(import.meta.url)) console.log(await proxy());
