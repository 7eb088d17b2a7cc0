/**
 * Uploads: 20 parallel uploads of a 25 MiB PDF, repeated, against bare Koa piping the request
 * body straight to a file; throughput of PDF bytes, the server's CPU time per upload and its peak
 * resident memory. The gateway on SQLite with in-memory limits (the embedded default), and on
 * PostgreSQL with limits on Redis. Limits are raised so that one account may upload all of them.
 * Run: node --import tsx bench/uploads.ts
 */
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDeployment, startBareKoa, type Deployment } from './lib/gateway.js';
import { median } from './lib/load.js';
import { isMain, type Service } from './lib/processes.js';
import { becomeLoadGenerator, cpuMicros, machine, memory, PINNING, sampleRss } from './lib/system.js';
import { mib, num, ratio, table } from './lib/table.js';
import { MAX_PDF_BYTES, uploadPdf, writePdf } from './lib/upload.js';

const PARALLEL = Number(process.env.BENCH_UPLOADS ?? 20);
const ROUNDS = Number(process.env.BENCH_UPLOAD_ROUNDS ?? 3);
// Its own per run: the limits on Redis count per account and per UTC day, in a Redis others share.
const ACCOUNT = `acct_uploads_${process.pid}_${Date.now()}`;
const RAISED_LIMITS = {
  maxFiles: 1_000_000,
  maxStoredBytes: 1_000_000_000_000,
  createsPerMinute: 1_000_000,
  createsPerDay: 1_000_000,
  bytesPerDay: 1_000_000_000_000,
};

interface Target {
  name: string;
  service: Service;
  /** The upload path and query. Default: /v1/files. */
  path?: string;
  headers: Record<string, string>;
  /** Removes what a round stored, outside the measured time. */
  clean(bodies: string[]): Promise<void>;
}

interface Round {
  megabytesPerSecond: number;
  cpuMillisPerUpload: number;
  peakRss: number;
  failures: number;
}

async function round(target: Target, pdfPath: string): Promise<Round> {
  const rss = sampleRss(target.service.pid);
  const cpuBefore = cpuMicros(target.service.pid);
  const started = process.hrtime.bigint();
  const results = await Promise.all(
    Array.from({ length: PARALLEL }, () => uploadPdf(`${target.service.url}${target.path ?? '/v1/files'}`, target.headers, pdfPath, MAX_PDF_BYTES)),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = cpuMicros(target.service.pid) - cpuBefore;
  const peakRss = rss.stop();
  const failures = results.filter((result) => result.status !== 200);
  if (failures.length > 0) process.stderr.write(`uploads: ${target.name}: ${failures.length} failed, e.g. ${failures[0]?.status} ${failures[0]?.body}\n`);
  await target.clean(results.map((result) => result.body));
  return {
    megabytesPerSecond: (PARALLEL * MAX_PDF_BYTES) / 1e6 / seconds,
    cpuMillisPerUpload: cpu / 1000 / PARALLEL,
    peakRss,
    failures: failures.length,
  };
}

async function gatewayTarget(deployment: Deployment, name: string): Promise<Target> {
  const { key } = await deployment.createKey(ACCOUNT);
  const service = await deployment.serve();
  const headers = { authorization: `Bearer ${key}` };
  return {
    name,
    service,
    headers,
    async clean(bodies) {
      for (const body of bodies) {
        const id = (JSON.parse(body) as { id?: string }).id;
        if (id) await fetch(`${service.url}/v1/files/${id}`, { method: 'DELETE', headers });
      }
    },
  };
}

export async function uploads(): Promise<string> {
  becomeLoadGenerator();
  const work = await mkdtemp(join(tmpdir(), 'kmg-bench-uploads-'));
  const services: Service[] = [];
  const deployments: Deployment[] = [];
  try {
    const pdfPath = join(work, 'bench.pdf');
    await writePdf(pdfPath, MAX_PDF_BYTES);
    const bareDir = join(work, 'bare');
    await mkdir(bareDir);
    const bare = await startBareKoa(bareDir);
    services.push(bare);
    const cleanBare = async () => {
      for (const name of await readdir(bareDir)) await rm(join(bareDir, name));
    };
    const targets: Target[] = [
      { name: 'bare Koa, body piped to a file', service: bare, headers: {}, clean: cleanBare },
      { name: 'bare Koa, piped to a file + fsync', service: bare, path: '/v1/files?fsync=1', headers: {}, clean: cleanBare },
    ];
    const sqlite = await createDeployment({ database: 'sqlite', limits: RAISED_LIMITS });
    deployments.push(sqlite);
    targets.push(await gatewayTarget(sqlite, 'gateway SQLite, memory limits'));
    const postgres = await createDeployment({ database: 'postgres', redis: true, limits: RAISED_LIMITS });
    deployments.push(postgres);
    targets.push(await gatewayTarget(postgres, 'gateway PostgreSQL, Redis limits'));

    const idleRss = new Map(targets.map((target) => [target.name, memory(target.service.pid).rss]));
    const rounds = new Map<string, Round[]>(targets.map((target) => [target.name, []]));
    for (let index = 1; index <= ROUNDS; index++) {
      for (const target of targets) {
        process.stderr.write(`uploads: round ${index}/${ROUNDS}: ${target.name}\n`);
        rounds.get(target.name)?.push(await round(target, pdfPath));
      }
    }
    const rows = targets.map((target) => {
      const runs = rounds.get(target.name) ?? [];
      return {
        name: target.name,
        megabytesPerSecond: median(runs.map((run) => run.megabytesPerSecond)),
        cpuMillisPerUpload: median(runs.map((run) => run.cpuMillisPerUpload)),
        idleRss: idleRss.get(target.name) ?? Number.NaN,
        peakRss: Math.max(...runs.map((run) => run.peakRss)),
        hwm: memory(target.service.pid).peak,
        failures: runs.reduce((sum, run) => sum + run.failures, 0),
      };
    });
    const base = rows[0] as (typeof rows)[number];
    const gatewayRows = rows.slice(2);
    return [
      `## Uploads (${PARALLEL} parallel uploads of a ${mib(MAX_PDF_BYTES)} PDF, median of ${ROUNDS} interleaved rounds, ${PINNING ? 'server on core 0, clients on core 1' : 'not pinned'})`,
      machine(),
      '',
      table(rows, [
        { heading: 'case', cell: (row) => row.name },
        { heading: 'MB/s', cell: (row) => num(row.megabytesPerSecond, 0), align: 'right' },
        { heading: 'vs bare', cell: (row) => ratio(row.megabytesPerSecond, base.megabytesPerSecond), align: 'right' },
        { heading: 'server CPU ms/upload', cell: (row) => num(row.cpuMillisPerUpload, 1), align: 'right' },
        { heading: 'RSS idle', cell: (row) => mib(row.idleRss), align: 'right' },
        { heading: 'RSS peak (sampled)', cell: (row) => mib(row.peakRss), align: 'right' },
        { heading: 'VmHWM', cell: (row) => mib(row.hwm), align: 'right' },
        { heading: 'failed', cell: (row) => num(row.failures), align: 'right' },
      ]),
      '',
      ...gatewayRows.map((row) => {
        const throughput = row.megabytesPerSecond / base.megabytesPerSecond;
        const met = throughput >= 0.5 && row.hwm < 128 * 1_048_576 && row.failures === 0;
        return `${row.name}: ${throughput.toFixed(2)}x bare throughput (target >= 0.5x), peak RSS ${mib(row.hwm)} (target < 128 MiB): ${met ? 'met' : 'NOT met'}`;
      }),
    ].join('\n');
  } finally {
    await Promise.all(services.map((service) => service.stop()));
    for (const deployment of deployments) await deployment.destroy();
    await rm(work, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) console.log(await uploads());
