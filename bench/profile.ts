/**
 * Where a server's CPU time went: the self time of a V8 CPU profile (`node --cpu-prof`, which
 * BENCH_PROFILE=<dir> makes every gateway write when it stops), grouped by where the code lives
 * (undici inside Node, web streams, each package, lib/, ...), then by what the gateway does (the log,
 * metering, limits, metrics, ...: `byFeature`), then the functions that cost most.
 * Shares are of the busy time (every sample but idle).
 * Run: node --import tsx bench/profile.ts <file.cpuprofile> [functions shown, default 25]
 */
import { readFileSync } from 'node:fs';
import { isMain } from './lib/processes.js';
import { num, table } from './lib/table.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

// The one WebAssembly in a Node server: llhttp, the HTTP parser of undici (Node's fetch).
const LLHTTP = "wasm (llhttp, undici's HTTP parser)";
/** Where Node's fetch spends its time: undici, its parser, web streams. */
const FETCH_PLACES = ['node:internal/deps/undici', LLHTTP, 'node:internal/webstreams'];

/** Where a function's code lives, in the words the report uses. */
export function placeOf(url: string, functionName: string): string {
  if (url === '') return /^\(.*\)$/.test(functionName) ? functionName : '(native: builtins, JSON, ...)';
  if (url.startsWith('wasm://')) return LLHTTP;
  if (url.startsWith('node:')) {
    // node:internal/deps/undici/undici -> node:internal/deps/undici; node:_http_server stays.
    const parts = url.split('/');
    return parts.length > 2 ? parts.slice(0, -1).join('/') : url;
  }
  const modules = /\/node_modules\/(?!\.cache\/)((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (modules) return modules[1] as string;
  const own = /\/(lib|reference-server|bench)\/(?:([^/]+)\/)?/.exec(url);
  if (own) return own[1] === 'lib' && own[2] ? `lib/${own[2]}` : (own[1] as string);
  return url;
}

const START_UP = 'start-up (loading and compiling modules)';
const REST = 'the rest: HTTP in and out (Node, undici), parsing and rewriting, the endpoint (lib/models)';

/** What a gateway does besides proxying, each by the code that does it (matched on `url functionName`). */
const FEATURES: ReadonlyArray<readonly [string, RegExp]> = [
  [START_UP, /^node:internal\/modules|^\S* (wrapSafe|compileSourceTextModule)$/],
  ['request log (pino)', /request-log\.js|\/pino\/|\/sonic-boom\//],
  ['metrics (prom-client)', /\/prom-client\/|gateway-metrics\.js|http-metrics\.js/],
  [
    'usage metering: records, batches, inserts',
    /usage-recorder\.js|stores\/knex\/usage-store\.js|meter-model-calls\.js|sqlite-writer\.js|\/knex\/|\/better-sqlite3\/|\/pg\/|\/pg-protocol\//,
  ],
  ['model limits', /redis-limiter\.js|model-limiter\.js|\/ioredis\/|\/redis-parser\/|rate-limit-headers\.js/],
  ['key check: hash, cache, changes', /api-key\.js|cached-key-store\.js|auth\/keys\.js|key-changes\.js/],
  ['error formatter, request ids, security headers', /error-formatter\.js|gateway-errors\.js|request-id\.js|lib\/random\.js|security-headers\.js/],
  ['prices and budgets (lib/cost)', /\/lib\/cost\//],
  ['routing: deployments, retries, cooldowns', /\/lib\/models\/routing\/|attempt-trace\.js/],
  ['tracing hooks (lib/tracing)', /\/lib\/tracing\/|\/@opentelemetry\//],
];
/** Koa's own code, charged when it is where a sample is (its next() ends every other feature's walk). */
const KOA = ['Koa and the router (own code)', /\/koa\/lib\/|\/koa-compose\/|\/@koa\/router\/|\/delegates\/|\/ee-first\/|\/on-finished\//] as const;

// A middleware's next(): what runs below it is not the middleware's own work.
const isNext = (url: string, functionName: string) =>
  url.includes('/koa-compose/') || (url.includes('/koa/lib/application') && functionName === 'handleRequest');

/**
 * The busy time by feature: each sample charged to the innermost frame on its stack whose code is
 * a feature's, looking no further than a middleware's `next()`; garbage collection and V8's own
 * work apart; what is left is the proxying that a bare proxy does too.
 */
function byFeature(profile: CpuProfile, byId: Map<number, ProfileNode>, self: Map<number, number>): Map<string, number> {
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const features = new Map<string, number>();
  for (const [id, micros] of self) {
    const { functionName } = (byId.get(id) as ProfileNode).callFrame;
    if (functionName === '(idle)') continue;
    const { url } = (byId.get(id) as ProfileNode).callFrame;
    let feature = functionName === '(garbage collector)' || functionName === '(program)' ? functionName : KOA[1].test(url) ? KOA[0] : undefined;
    for (let at: number | undefined = id; feature === undefined && at !== undefined; at = parent.get(at)) {
      const frame = (byId.get(at) as ProfileNode).callFrame;
      if (isNext(frame.url, frame.functionName)) break;
      feature = FEATURES.find(([, code]) => code.test(`${frame.url} ${frame.functionName}`))?.[0];
    }
    feature ??= REST;
    features.set(feature, (features.get(feature) ?? 0) + micros);
  }
  return features;
}

export function summarise(profile: CpuProfile, functions = 25): string {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<number, number>();
  // Each sample's time is the gap to the next one.
  for (const [index, id] of profile.samples.entries()) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[index + 1] ?? 0));
  const places = new Map<string, number>();
  const named = new Map<string, { place: string; micros: number }>();
  let busy = 0;
  for (const [id, micros] of self) {
    const { functionName, url, lineNumber } = (byId.get(id) as ProfileNode).callFrame;
    if (functionName === '(idle)') continue;
    busy += micros;
    const place = placeOf(url, functionName);
    places.set(place, (places.get(place) ?? 0) + micros);
    const name = `${functionName || '(anonymous)'} ${url.split('/').at(-1) ?? ''}:${lineNumber + 1}`;
    const entry = named.get(name) ?? { place, micros: 0 };
    entry.micros += micros;
    named.set(name, entry);
  }
  const share = (micros: number) => `${num((micros / busy) * 100, 1)} %`;
  const sorted = <T extends { micros: number }>(rows: T[]) => rows.sort((a, b) => b.micros - a.micros);
  const fetchShare = FETCH_PLACES.reduce((sum, place) => sum + (places.get(place) ?? 0), 0);
  const features = byFeature(profile, byId, self);
  const running = busy - (features.get(START_UP) ?? 0);
  return [
    `Busy ${num(busy / 1000)} ms; inside Node's fetch (undici in node:internal/deps, its llhttp) and web streams: ${share(fetchShare)} of it (self time).`,
    '',
    table(
      sorted([...places].map(([place, micros]) => ({ place, micros }))).filter((row) => row.micros / busy >= 0.005),
      [
        { heading: 'where (self time)', cell: (row) => row.place },
        { heading: 'ms', cell: (row) => num(row.micros / 1000), align: 'right' },
        { heading: 'share', cell: (row) => share(row.micros), align: 'right' },
      ],
    ),
    '',
    table(sorted([...features].map(([feature, micros]) => ({ feature, micros }))), [
      { heading: 'by feature (innermost on the stack, up to a next())', cell: (row) => row.feature },
      { heading: 'ms', cell: (row) => num(row.micros / 1000), align: 'right' },
      {
        heading: 'share of the time after start-up',
        cell: (row) => (row.feature === START_UP ? '—' : `${num((row.micros / running) * 100, 1)} %`),
        align: 'right',
      },
    ]),
    '',
    table(sorted([...named].map(([name, entry]) => ({ name, ...entry }))).slice(0, functions), [
      { heading: 'function', cell: (row) => row.name },
      { heading: 'where', cell: (row) => row.place },
      { heading: 'ms', cell: (row) => num(row.micros / 1000), align: 'right' },
      { heading: 'share', cell: (row) => share(row.micros), align: 'right' },
    ]),
  ].join('\n');
}

if (isMain(import.meta.url)) {
  const [file, functions] = process.argv.slice(2);
  if (!file) {
    console.error('usage: node --import tsx bench/profile.ts <file.cpuprofile> [functions]');
    process.exit(2);
  }
  console.log(summarise(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, Number(functions ?? 25)));
}
