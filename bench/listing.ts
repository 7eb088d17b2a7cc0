/**
 * Listing: GET /v1/files?limit=10000 on an account holding 10,000 files (beside another account
 * holding as many), on SQLite and PostgreSQL. Client-side latency of the listing, one request at
 * a time, and meanwhile how long the server's event loop is blocked: a cheap request (GET /healthz)
 * sent every PROBE_INTERVAL_MS beside the listings, and the server's own event-loop delay.
 * Run: node --import tsx bench/listing.ts
 */
import { readFile, rm } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createDeployment, seedFiles, type DatabaseKind, type Deployment } from './lib/gateway.js';
import { percentiles } from './lib/load.js';
import { isMain, type Service } from './lib/processes.js';
import { becomeLoadGenerator, cpuMicros, machine, PINNING } from './lib/system.js';
import { num, table } from './lib/table.js';

const FILES = 10_000;
const LISTINGS = Number(process.env.BENCH_LISTINGS ?? 40);
const WARMUP_LISTINGS = 5;
const PROBE_INTERVAL_MS = 10;
const ACCOUNT = 'acct_listing';

/** One request on a keep-alive agent: its status, body length and time to the last byte (ms). */
function timedGet(agent: Agent, url: string, headers: Record<string, string>): Promise<{ status: number; bytes: number; ms: number; body: Buffer }> {
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.once('end', () => {
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, bytes: body.length, ms: Number(process.hrtime.bigint() - started) / 1e6, body });
      });
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end();
  });
}

/** GET /healthz every PROBE_INTERVAL_MS, one at a time, until stopped; returns the latencies. */
function probe(url: string): { stop(): Promise<number[]> } {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      latencies.push((await timedGet(agent, `${url}/healthz`, {})).ms);
      await sleep(PROBE_INTERVAL_MS);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      agent.destroy();
      return latencies;
    },
  };
}

/** The server's event-loop delay since the last call (see bench/lib/loop-monitor.ts). */
async function loopDelay(service: Service, file: string): Promise<{ max: number; p99: number }> {
  await rm(file, { force: true });
  process.kill(service.pid, 'SIGUSR2');
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      return JSON.parse(await readFile(file, 'utf8')) as { max: number; p99: number };
    } catch {
      await sleep(20);
    }
  }
  throw new Error(`${service.name}: no event-loop figures in ${file}`);
}

interface Row {
  name: string;
  p50: number;
  p99: number;
  cpuMillis: number;
  bytes: number;
  probeIdle: { p50: number; max: number };
  probeBusy: { p50: number; p99: number; max: number };
  /** The server's longest event-loop delay with nothing but the probe running: this machine's noise. */
  loopIdleMax: number;
  loop: { p99: number; max: number };
}

async function measure(kind: DatabaseKind, deployment: Deployment): Promise<Row> {
  const { key } = await deployment.createKey(ACCOUNT);
  await seedFiles(deployment.knex(), ACCOUNT, FILES);
  await seedFiles(deployment.knex(), 'acct_neighbour', FILES);
  const loopFile = join(tmpdir(), `kmg-bench-loop-${process.pid}-${kind}.json`);
  const service = await deployment.serve({ preloads: ['bench/lib/loop-monitor.ts'], env: { BENCH_LOOP_FILE: loopFile } });
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const url = `${service.url}/v1/files?limit=${FILES}`;
  const headers = { authorization: `Bearer ${key}` };
  try {
    const first = await timedGet(agent, url, headers);
    const page = JSON.parse(first.body.toString()) as { data?: unknown[]; has_more?: boolean };
    if (first.status !== 200 || page.data?.length !== FILES || page.has_more !== false) {
      throw new Error(`${service.name}: the listing answered ${first.status} with ${page.data?.length} files: ${first.body.subarray(0, 300).toString()}`);
    }
    for (let index = 1; index < WARMUP_LISTINGS; index++) await timedGet(agent, url, headers);

    // The noise floor: the same figures with nothing but the probe running.
    await loopDelay(service, loopFile); // starts the server's figures over
    const idleProbe = probe(service.url);
    await sleep(2000);
    const idle = percentiles(await idleProbe.stop());
    const idleLoop = await loopDelay(service, loopFile);

    const busyProbe = probe(service.url);
    const cpuBefore = cpuMicros(service.pid);
    const latencies: number[] = [];
    for (let index = 0; index < LISTINGS; index++) latencies.push((await timedGet(agent, url, headers)).ms);
    const cpu = cpuMicros(service.pid) - cpuBefore;
    const busy = percentiles(await busyProbe.stop());
    const loop = await loopDelay(service, loopFile);
    const listing = percentiles(latencies);
    return {
      name: kind === 'sqlite' ? 'gateway SQLite' : 'gateway PostgreSQL',
      p50: listing.p50,
      p99: listing.p99,
      cpuMillis: cpu / 1000 / LISTINGS,
      bytes: first.bytes,
      probeIdle: idle,
      probeBusy: busy,
      loopIdleMax: idleLoop.max,
      loop,
    };
  } finally {
    agent.destroy();
    await rm(loopFile, { force: true });
  }
}

export async function listing(): Promise<string> {
  becomeLoadGenerator();
  const rows: Row[] = [];
  for (const kind of ['sqlite', 'postgres'] as const) {
    const deployment = await createDeployment({ database: kind });
    try {
      process.stderr.write(`listing: ${kind}\n`);
      rows.push(await measure(kind, deployment));
    } finally {
      await deployment.destroy();
    }
  }
  return [
    `## Listing (GET /v1/files?limit=${FILES} on an account of ${num(FILES)} files, ${LISTINGS} requests one at a time; GET /healthz every ${PROBE_INTERVAL_MS} ms beside them; ${PINNING ? 'server on core 0, clients on core 1' : 'not pinned'})`,
    machine(),
    '',
    table(rows, [
      { heading: 'case', cell: (row) => row.name },
      { heading: 'p50 ms', cell: (row) => num(row.p50, 1), align: 'right' },
      { heading: 'p99 ms', cell: (row) => num(row.p99, 1), align: 'right' },
      { heading: 'server CPU ms/listing', cell: (row) => num(row.cpuMillis, 1), align: 'right' },
      { heading: 'body', cell: (row) => `${num(row.bytes / 1e6, 2)} MB`, align: 'right' },
      {
        heading: 'healthz during p50/p99/max ms',
        cell: (row) => `${num(row.probeBusy.p50, 1)} / ${num(row.probeBusy.p99, 1)} / ${num(row.probeBusy.max, 1)}`,
        align: 'right',
      },
      { heading: 'event-loop delay p99/max ms', cell: (row) => `${num(row.loop.p99, 1)} / ${num(row.loop.max, 1)}`, align: 'right' },
      { heading: 'idle: healthz max / loop max ms', cell: (row) => `${num(row.probeIdle.max, 1)} / ${num(row.loopIdleMax, 1)}`, align: 'right' },
    ]),
    '',
    ...rows.map((row) => {
      const met = row.p50 < 50 && row.loop.p99 < 50 && row.loop.max < 50;
      const noisy = row.loop.max >= 50 && row.loopIdleMax >= 50 ? ' (the idle server saw as long a delay: machine noise)' : '';
      return `${row.name}: p50 ${num(row.p50, 1)} ms (target < 50), event loop blocked at most ${num(row.loop.max, 1)} ms, p99 ${num(row.loop.p99, 1)} ms (target < 50): ${met ? 'met' : `NOT met${noisy}`}`;
    }),
  ].join('\n');
}

if (isMain(import.meta.url)) console.log(await listing());
