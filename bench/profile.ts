/**
 * Where a server's CPU time went: the self time of a V8 CPU profile (`node --cpu-prof`, which
 * BENCH_PROFILE=<dir> makes every gateway write when it stops), grouped by where the code lives
 * (undici inside Node, web streams, each package, lib/, ...), then the functions that cost most.
 * Shares are of the busy time (every sample but idle).
 * Run: node --import tsx bench/profile.ts <file.cpuprofile> [functions shown, default 25]
 */
import { readFileSync } from 'node:fs';
import { isMain } from './lib/processes.js';
import { num, table } from './lib/table.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
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

export function summarise(profile: CpuProfile, functions = 25): string {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<number, number>();
  // Each sample's time is the gap to the next one.
  profile.samples.forEach((id, index) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[index + 1] ?? 0)));
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
  return [
    `Busy ${num(busy / 1000)} ms; inside Node's fetch (undici in node:internal/deps, its llhttp) and web streams: ${share(fetchShare)} of it (self time).`,
    '',
    table(sorted([...places].map(([place, micros]) => ({ place, micros }))).filter((row) => row.micros / busy >= 0.005), [
      { heading: 'where (self time)', cell: (row) => row.place },
      { heading: 'ms', cell: (row) => num(row.micros / 1000), align: 'right' },
      { heading: 'share', cell: (row) => share(row.micros), align: 'right' },
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
