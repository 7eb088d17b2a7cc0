import { createRequire } from 'node:module';
import { countInstructions, cpuMicros } from './system.js';

interface AutocannonOptions {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: Buffer;
  connections: number;
  duration: number;
  timeout?: number;
}

interface AutocannonResult {
  duration: number;
  errors: number;
  timeouts: number;
  statusCodeStats: Record<string, { count: number }>;
  latency: { p50: number; p99: number; max: number };
  requests: { total: number };
}

// autocannon ships no types: this is the part of its API the benches use.
const autocannon = createRequire(import.meta.url)('autocannon') as (options: AutocannonOptions) => Promise<AutocannonResult>;

/** Seconds each measured load run lasts (BENCH_DURATION), and its unmeasured warm-up (BENCH_WARMUP). */
export const DURATION = Number(process.env.BENCH_DURATION ?? 10);
export const WARMUP = Number(process.env.BENCH_WARMUP ?? 3);

export interface LoadOptions {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: Buffer;
  connections?: number;
  /** The status every response must have; a run with any other is reported as failed. */
  expectStatus: number;
  /** The server process whose CPU time is charged to the requests. */
  pid: number;
}

export interface LoadResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  max: number;
  /** Server CPU time (user + system, every thread) per completed request, in microseconds. */
  cpuMicrosPerRequest: number;
  /** Server instructions per completed request (`perf stat`); NaN without perf. */
  instructionsPerRequest: number;
  requests: number;
  /** Responses with another status than expected, errors and timeouts. */
  failures: number;
  statuses: Record<string, number>;
}

function statuses(result: AutocannonResult): Record<string, number> {
  return Object.fromEntries(Object.entries(result.statusCodeStats).map(([status, { count }]) => [status, count]));
}

/** A warm-up, then `DURATION` seconds of load with autocannon, with the server's CPU time over the run. */
export async function load(options: LoadOptions): Promise<LoadResult> {
  const base: Omit<AutocannonOptions, 'duration'> = {
    url: options.url,
    method: options.method ?? 'GET',
    headers: options.headers ?? {},
    connections: options.connections ?? 50,
    timeout: 30,
    ...(options.body ? { body: options.body } : {}),
  };
  if (WARMUP > 0) await autocannon({ ...base, duration: WARMUP });
  const instructions = countInstructions(options.pid);
  const cpuBefore = cpuMicros(options.pid);
  const started = process.hrtime.bigint();
  const result = await autocannon({ ...base, duration: DURATION });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = cpuMicros(options.pid) - cpuBefore;
  const executed = await instructions.stop();
  const counts = statuses(result);
  const completed = result.requests.total;
  const expected = counts[String(options.expectStatus)] ?? 0;
  return {
    requestsPerSecond: completed / seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    max: result.latency.max,
    cpuMicrosPerRequest: completed > 0 ? cpu / completed : Number.NaN,
    instructionsPerRequest: completed > 0 ? executed / completed : Number.NaN,
    requests: completed,
    failures: completed - expected + result.errors + result.timeouts,
    statuses: counts,
  };
}

/** The median of `values` (the middle one, or the mean of the two middle ones). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length / 2;
  return sorted.length % 2 === 1 ? (sorted[Math.floor(middle)] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** Latency percentiles of `samples` (milliseconds), nearest rank. */
export function percentiles(samples: readonly number[]): { p50: number; p99: number; max: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
  return { p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? Number.NaN };
}
