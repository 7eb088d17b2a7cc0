/**
 * Usage at scale: each deployment (the embedded SQLite, PostgreSQL) filled with BENCH_USAGE_RECORDS
 * usage records (default 10,000,000) over the last 60 days, through the usage store's own batch
 * insert (its roll-ups kept as the server keeps them; on PostgreSQL into its day partitions), then
 * each admin usage route timed through the reference server's app in this process (p50 and p95 of
 * BENCH_SAMPLES calls, default 20), and the budget rebuild (`spendFromUsage`, a key's and an
 * account's day and month); a chat call's latency to the echo model (p50, p95 and p99 of
 * BENCH_CHAT_SAMPLES calls, default 2,000) alone and while the heaviest report (the route of the
 * highest p50 just measured) runs without pause, each from a client thread of its own. BENCH_USAGE_CHECKPOINTS (counts, comma-separated) times them at those
 * counts too, each table printed once measured; BENCH_USAGE_DEPLOYMENTS (default `sqlite,postgres`)
 * picks the deployments. PostgreSQL from BENCH_DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/test), in a database of its own, dropped after; skipped when
 * none answers.
 * Run: BENCH_USAGE_RECORDS=1000000 node --import tsx bench/usage-scale.ts */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import knexFactory from 'knex';
import { pino } from 'pino';
import { createAdminToken } from '../lib/admin/admin-tokens.js';
import { createApiKey } from '../lib/auth/keys.js';
import { SCOPES } from '../lib/auth/scopes.js';
import { spendFromUsage } from '../lib/cost/budgets.js';
import { addUsagePartitions } from '../lib/stores/knex/usage-partitions.js';
import type { UsageRecord } from '../lib/usage/usage-store.js';
import { createApp } from '../reference-server/app.js';
import { loadConfig } from '../reference-server/config.js';
import { openDeployment } from '../reference-server/deployment.js';
import { createHttpServer } from '../reference-server/http-server.js';
import { isMain } from './lib/processes.js';
import { num, table } from './lib/table.js';

const RECORDS = Number(process.env.BENCH_USAGE_RECORDS ?? 10_000_000);
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 20);
// Enough for a p99 that is not one call's accident: its 20 slowest calls lie above it.
const CHAT_SAMPLES = Number(process.env.BENCH_CHAT_SAMPLES ?? 2000);
/** The fewest samples whose p99 is shown: below it, the p99 is their slowest. */
const P99_SAMPLES = 100;
// The record counts at which the routes are timed, the last being BENCH_USAGE_RECORDS: a run too long for the machine still measures the first.
const CHECKPOINTS = [
  ...(process.env.BENCH_USAGE_CHECKPOINTS ?? '')
    .split(',')
    .filter(Boolean)
    .map(Number)
    .filter((count) => count < RECORDS),
  RECORDS,
];
const DEPLOYMENTS = (process.env.BENCH_USAGE_DEPLOYMENTS ?? 'sqlite,postgres').split(',');
const POSTGRES_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const DAY_MS = 86_400_000;
const BATCH = 5000;
const ACCOUNTS = 20;
const KEYS_PER_ACCOUNT = 10;
const MODELS = ['echo-1', 'echo-2', 'gpt-4o', 'gpt-4o-mini', 'claude-sonnet', null];
const ENDPOINTS = ['/v1/chat/completions', '/v1/messages', '/v1/responses'];
const STATUSES = [200, 200, 200, 200, 200, 200, 200, 429, 400, 502];

interface Row {
  deployment: string;
  records: number;
  request: string;
  p50: number;
  p95: number;
  /** Of a request timed P99_SAMPLES times or more. */
  p99?: number;
}

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))] ?? 0;

const percentiles = (times: number[]): Pick<Row, 'p50' | 'p95' | 'p99'> => ({
  p50: percentile(times, 0.5),
  p95: percentile(times, 0.95),
  ...(times.length >= P99_SAMPLES && { p99: percentile(times, 0.99) }),
});

async function timed(call: () => Promise<unknown>, samples = SAMPLES): Promise<Pick<Row, 'p50' | 'p95' | 'p99'>> {
  await call(); // warm
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const start = performance.now();
    await call();
    times.push(performance.now() - start);
  }
  return percentiles(times);
}

interface Call {
  url: string;
  init: RequestInit;
}

const CLIENT_THREAD = `
const { parentPort, workerData: { url, init, samples } } = require('node:worker_threads');
let stopped = false;
parentPort.once('message', () => (stopped = true));
const call = async () => {
  const response = await fetch(url, init);
  if (response.status !== 200) throw new Error(url + ': ' + response.status);
  await response.arrayBuffer();
};
(async () => {
  await call(); // warm
  const times = [];
  while (samples === undefined ? !stopped : times.length < samples) {
    const start = performance.now();
    await call();
    times.push(performance.now() - start);
  }
  parentPort.postMessage(times);
})();
`;

/**
 * `call` made one after the other from a thread of its own: `samples` times, resolving to their
 * times in ms; without `samples`, until `stop()`.
 */
function callsInThread(call: Call, samples: number): Promise<number[]>;
function callsInThread(call: Call): { stop(): Promise<number[]> };
function callsInThread(call: Call, samples?: number) {
  const worker = new Worker(CLIENT_THREAD, { eval: true, workerData: { ...call, samples } });
  const times = new Promise<number[]>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  }).finally(() => worker.terminate());
  if (samples !== undefined) return times;
  return {
    stop() {
      worker.postMessage('stop');
      return times;
    },
  };
}

/**
 * N records over the 60 days before `now`, spread over the accounts, keys, models, endpoints and
 * statuses; each batch a run of consecutive times, the batches in an order that strides over the
 * 60 days, so that the records of any first checkpoint cover them all.
 */
function* records(keyIds: string[][], now: number): Generator<UsageRecord[]> {
  const start = now - 60 * DAY_MS;
  const step = (60 * DAY_MS) / RECORDS;
  const batches = Math.ceil(RECORDS / BATCH);
  let stride = Math.max(1, Math.round(batches * 0.618));
  while (gcd(stride, batches) !== 1) stride += 1;
  for (let visit = 0; visit < batches; visit++) {
    const first = ((visit * stride) % batches) * BATCH;
    const batch: UsageRecord[] = [];
    for (let i = first; i < Math.min(first + BATCH, RECORDS); i++) {
      const account = i % ACCOUNTS;
      const model = MODELS[(i >>> 3) % MODELS.length] ?? null;
      const status = STATUSES[(i * 7) % STATUSES.length] ?? 200;
      batch.push({
        time: Math.floor(start + i * step),
        requestId: `req_${i.toString(36).padStart(32, '0')}`,
        keyId: keyIds[account]?.[(i >>> 5) % KEYS_PER_ACCOUNT] ?? 'key_none',
        account: `account-${account}`,
        endpoint: ENDPOINTS[i % ENDPOINTS.length] ?? '/v1/chat/completions',
        model: status === 400 ? null : model,
        provider: status === 400 ? null : 'echo',
        attempts: 1,
        status,
        stream: i % 2 === 0,
        inputTokens: status === 200 ? 100 + (i % 900) : 0,
        outputTokens: status === 200 ? 10 + (i % 300) : 0,
        attachments: 0,
        latencyMs: 20 + (i % 500),
        upstreamFirstByteMs: 5,
        upstreamMs: 15,
        costPicoUsd: status === 200 ? 1_000_000 * (1 + (i % 50)) : 0,
      });
    }
    yield batch;
  }
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** The route of `routes` whose p50 in `rows` (its `GET /admin/v1` row) is the highest: the heaviest report, as measured. */
function slowest(routes: readonly string[], rows: readonly Row[]): string {
  const p50 = (route: string) => rows.find((row) => row.request === `GET /admin/v1${route}`)?.p50 ?? 0;
  return routes.reduce((heaviest, route) => (p50(route) > p50(heaviest) ? route : heaviest));
}

// The machine's load beside the figures: a shared host's load stretches every one of them.
const load = () =>
  `load average ${loadavg()
    .map((average) => num(average, 1))
    .join(', ')}`;

async function runDeployment(name: string, env: Record<string, string>): Promise<Row[]> {
  const dataDir = await mkdtemp(join(tmpdir(), 'kmg-usage-scale-'));
  const config = loadConfig({ ...env, DATA_DIR: dataDir, LOG_LEVEL: 'silent' });
  const logger = pino({ level: 'silent' });
  const deployment = await openDeployment(config, logger);
  const server = createHttpServer(createApp(deployment, logger).callback(), logger);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const prefix = config.gateway.keyPrefix;
    const keyIds: string[][] = [];
    for (let account = 0; account < ACCOUNTS; account++) {
      const ids: string[] = [];
      for (let k = 0; k < KEYS_PER_ACCOUNT; k++)
        ids.push((await createApiKey(deployment.keys, { prefix, account: `account-${account}`, scopes: [...SCOPES], models: null })).record.id);
      keyIds.push(ids);
    }
    const now = Date.now();
    // On PostgreSQL, the day partitions a gateway running those 60 days would have made.
    if (deployment.knex.client.dialect === 'postgresql') for (let day = 60; day >= 0; day -= 4) await addUsagePartitions(deployment.knex, now - day * DAY_MS);
    // Each route, the rebuild and a chat call, timed with `records` written.
    const measure = async (records: number): Promise<Row[]> => {
      const { token } = await createAdminToken(deployment.adminTokens, { prefix, name: 'bench' });
      const admin = async (path: string) => {
        const response = await fetch(`${url}/admin/v1${path}`, { headers: { authorization: `Bearer ${token}` } });
        if (response.status !== 200) throw new Error(`${path}: ${response.status}`);
        await response.arrayBuffer();
      };
      const key = keyIds[0]?.[0] ?? '';
      const since30 = Math.floor((now - 30 * DAY_MS) / 1000) + 1234; // within an hour: records, hourly and daily roll-ups
      const routes = [
        '/accounts',
        '/usage',
        '/usage?account=account-0',
        '/usage?account=account-0&series=model',
        `/usage?since=${since30}&by=model&series=day`,
        `/usage?key=${key}`,
        '/accounts/account-0/limits',
        '/requests?limit=100',
        '/requests?account=account-3&status=429&limit=100',
      ];
      const rows: Row[] = [];
      for (const route of routes) rows.push({ deployment: name, records, request: `GET /admin/v1${route}`, ...(await timed(() => admin(route))) });
      const rebuild = spendFromUsage(deployment.usageStore, deployment.keys);
      rows.push({ deployment: name, records, request: 'budget rebuild, a key (day and month)', ...(await timed(() => rebuild(key, now))) });
      rows.push({ deployment: name, records, request: 'budget rebuild, an account (day and month)', ...(await timed(() => rebuild('account-0', now))) });

      // A chat call alone, then while the heaviest report runs again and again; each from a thread of
      // its own, as clients are apart from the server: only the server's work shares its event loop.
      const chatKey = (await createApiKey(deployment.keys, { prefix, account: 'account-0', scopes: [...SCOPES], models: null })).key;
      const chat: Call = {
        url: `${url}/v1/chat/completions`,
        init: {
          method: 'POST',
          headers: { authorization: `Bearer ${chatKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] }),
        },
      };
      rows.push({ deployment: name, records, request: 'chat call, alone', ...percentiles(await callsInThread(chat, CHAT_SAMPLES)) });
      const heaviest = slowest(routes, rows);
      const reports = callsInThread({ url: `${url}/admin/v1${heaviest}`, init: { headers: { authorization: `Bearer ${token}` } } });
      rows.push({
        deployment: name,
        records,
        request: `chat call, while GET /admin/v1${heaviest} runs`,
        ...percentiles(await callsInThread(chat, CHAT_SAMPLES)),
      });
      await reports.stop();
      return rows;
    };
    const filling = performance.now();
    const batches = records(keyIds, now);
    const rows: Row[] = [];
    let written = 0;
    for (const checkpoint of CHECKPOINTS) {
      while (written < checkpoint) {
        const { value: batch, done } = batches.next();
        if (done) break;
        await deployment.usageStore.insert(batch);
        written += batch.length;
      }
      console.error(`${name}: ${num(written)} records written in ${num((performance.now() - filling) / 1000, 1)} s, ${load()}`);
      const measured = await measure(written);
      console.error(`${name}: measured, ${load()}`);
      // Printed as soon as measured: a run stopped before its end keeps what it measured.
      console.error(tableOf(measured));
      rows.push(...measured);
    }
    return rows;
  } finally {
    await new Promise((resolve) => server.close(resolve));
    await deployment.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

async function throwawayPostgres(): Promise<{ url: string; drop(): Promise<void> } | undefined> {
  const name = `kmg_bench_${randomBytes(6).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: POSTGRES_URL });
  try {
    await admin.raw('create database ??', [name]);
  } catch {
    return undefined;
  } finally {
    await admin.destroy();
  }
  console.error(`PostgreSQL: database ${name}`);
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const again = knexFactory({ client: 'pg', connection: POSTGRES_URL });
      await again.raw('drop database if exists ?? with (force)', [name]).finally(() => again.destroy());
    },
  };
}

export async function main(): Promise<void> {
  const rows = DEPLOYMENTS.includes('sqlite') ? await runDeployment('SQLite', {}) : [];
  const postgres = DEPLOYMENTS.includes('postgres') ? await throwawayPostgres() : undefined;
  if (postgres === undefined) console.error('PostgreSQL: not asked for, or no server answers: skipped');
  else {
    try {
      rows.push(...(await runDeployment('PostgreSQL', { DATABASE_URL: postgres.url })));
    } finally {
      await postgres.drop();
    }
  }
  console.log(
    `Usage at scale: ${num(RECORDS)} records over 60 days, ${ACCOUNTS} accounts × ${KEYS_PER_ACCOUNT} keys, ${SAMPLES} samples a request, ${num(CHAT_SAMPLES)} a chat call\n`,
  );
  console.log(tableOf(rows));
}

function tableOf(rows: Row[]): string {
  return table(rows, [
    { heading: 'deployment', cell: (row) => row.deployment },
    { heading: 'records', cell: (row) => num(row.records), align: 'right' },
    { heading: 'request', cell: (row) => row.request },
    { heading: 'p50 ms', cell: (row) => num(row.p50, 1), align: 'right' },
    { heading: 'p95 ms', cell: (row) => num(row.p95, 1), align: 'right' },
    { heading: 'p99 ms', cell: (row) => (row.p99 === undefined ? '—' : num(row.p99, 1)), align: 'right' },
  ]);
}

if (isMain(import.meta.url)) await main();
