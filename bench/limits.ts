/**
 * Limits: what the creation-quota check costs per upload, in memory and on Redis.
 * 1. The CreationLimiter itself, in this process: reserve, and reserve + release, one at a time
 *    and 50 at a time, over many accounts (as many uploads of many accounts would).
 * 2. Through the server: small (1 KiB) PDF uploads, 10 connections, on the embedded default with
 *    the limits in memory against the same with the limits on Redis.
 * 3. The model-call check on Redis (`RedisModelLimiter.consume`), one at a time, beside a PING on
 *    the same connection: the round trip every model call waits for before it is forwarded, when
 *    its requests per minute are exact across processes; back to back, and with the process asleep
 *    for a moment before each, as a server is between calls that come one at a time.
 * Run: node --import tsx bench/limits.ts
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { CreationLimiter } from '../lib/quota/creation-limiter.js';
import { MemoryCreationLimiter } from '../lib/stores/memory/creation-limiter.js';
import { createRedisClient } from '../lib/stores/redis/client.js';
import { RedisCreationLimiter } from '../lib/stores/redis/creation-limiter.js';
import { RedisModelLimiter } from '../lib/stores/redis/model-limiter.js';
import { createDeployment, REDIS_URL, type Deployment } from './lib/gateway.js';
import { DURATION, load, percentiles, type LoadResult } from './lib/load.js';
import { isMain } from './lib/processes.js';
import { becomeLoadGenerator, machine, PINNING } from './lib/system.js';
import { num, ratio, table } from './lib/table.js';
import { multipartBody } from './lib/upload.js';

const OPERATIONS = Number(process.env.BENCH_LIMIT_OPERATIONS ?? 20_000);
const ACCOUNTS = 1000;
const HIGH = { createsPerMinute: 1_000_000_000, createsPerDay: 1_000_000_000, bytesPerDay: 1_000_000_000_000 };
const UPLOAD_CONNECTIONS = 10;
/** What a server sleeps between two calls' checks when its calls come one at a time, about. */
const IDLE_BETWEEN_CHECKS_MS = 0.3;

interface DirectRow {
  name: string;
  wallMicros: number;
  cpuMicros: number;
  redisMicros: number | null;
}

/** Redis server CPU time so far (INFO cpu), in microseconds. */
async function redisCpuMicros(client: Redis): Promise<number> {
  const info = await client.info('cpu');
  const seconds = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return (seconds('used_cpu_sys') + seconds('used_cpu_user')) * 1e6;
}

async function direct(name: string, limiter: CreationLimiter, release: boolean, concurrency: number, redis: Redis | null): Promise<DirectRow> {
  const prefix = `acct_${Math.random().toString(36).slice(2)}`;
  const one = async (index: number) => {
    const reservation = await limiter.reserve(`${prefix}_${index % ACCOUNTS}`, 1_000_000);
    if (release) await reservation.release();
  };
  // Warm-up: JIT, connections.
  for (let index = 0; index < 1000; index++) await one(index);
  const redisBefore = redis ? await redisCpuMicros(redis) : 0;
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < OPERATIONS) await one(next++);
    }),
  );
  const wall = Number(process.hrtime.bigint() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const redisCpu = redis ? (await redisCpuMicros(redis)) - redisBefore : null;
  return {
    name,
    wallMicros: wall / OPERATIONS,
    cpuMicros: (cpu.user + cpu.system) / OPERATIONS,
    redisMicros: redisCpu === null ? null : redisCpu / OPERATIONS,
  };
}

async function redisClient(): Promise<Redis> {
  try {
    const client = await createRedisClient(REDIS_URL);
    client.on('error', () => undefined);
    return client;
  } catch (err) {
    throw new Error(`bench: no Redis at ${REDIS_URL} (set BENCH_REDIS_URL): ${(err as Error).message}`, { cause: err });
  }
}

async function directRows(): Promise<DirectRow[]> {
  const memory = new MemoryCreationLimiter(HIGH);
  const client = await redisClient();
  const info = await redisClient();
  try {
    const onRedis = new RedisCreationLimiter({ client, keyPrefix: `kmg-bench:${process.pid}`, ...HIGH });
    const rows: DirectRow[] = [];
    for (const concurrency of [1, 50]) {
      for (const release of [false, true]) {
        const what = `${release ? 'reserve + release' : 'reserve'}, ${concurrency} at a time`;
        process.stderr.write(`limits: ${what}\n`);
        rows.push(await direct(`memory: ${what}`, memory, release, concurrency, null));
        rows.push(await direct(`Redis: ${what}`, onRedis, release, concurrency, info));
      }
    }
    return rows;
  } finally {
    // Every counter this run wrote: they would expire by themselves within a day.
    const keys = await info.keys(`kmg-bench:${process.pid}:*`);
    for (let start = 0; start < keys.length; start += 500) await info.del(...keys.slice(start, start + 500));
    client.disconnect();
    info.disconnect();
  }
}

interface RoundTripRow {
  name: string;
  /** Milliseconds. */
  took: { p50: number; p99: number };
}

/**
 * `call` one at a time, OPERATIONS times after a tenth as many unmeasured: how long each took.
 * With `idleMs`, the process sleeps that long before each, as a server does between its calls.
 */
async function oneAtATime(name: string, call: () => Promise<unknown>, idleMs = 0): Promise<RoundTripRow> {
  for (let index = 0; index < OPERATIONS / 10; index++) await call();
  const took: number[] = [];
  for (let index = 0; index < OPERATIONS; index++) {
    if (idleMs > 0) await delay(idleMs);
    const started = performance.now();
    await call();
    took.push(performance.now() - started);
  }
  return { name, took: percentiles(took) };
}

async function roundTripRows(): Promise<RoundTripRow[]> {
  const client = await redisClient();
  const keyPrefix = `kmg-bench:${process.pid}`;
  try {
    const limiter = new RedisModelLimiter({ client, keyPrefix });
    const limits = { requestsPerMinute: 1_000_000_000, tokensPerMinute: 1_000_000_000_000 };
    process.stderr.write('limits: model-call checks one at a time\n');
    const consume = () => limiter.consume('key_bench', limits);
    return [
      await oneAtATime('Redis PING, back to back', () => client.ping()),
      await oneAtATime('RedisModelLimiter.consume (EVALSHA), back to back', consume),
      await oneAtATime(`RedisModelLimiter.consume, ${IDLE_BETWEEN_CHECKS_MS} ms asleep before each`, consume, IDLE_BETWEEN_CHECKS_MS),
    ];
  } finally {
    const keys = await client.keys(`${keyPrefix}:*`);
    if (keys.length > 0) await client.del(...keys);
    client.disconnect();
  }
}

interface UploadRow {
  name: string;
  result: LoadResult;
}

async function uploadRow(name: string, deployment: Deployment): Promise<UploadRow> {
  // Its own per run: the limits on Redis count per account and per UTC day, in a Redis others share.
  const { key } = await deployment.createKey(`acct_limits_${process.pid}_${Date.now()}`);
  const service = await deployment.serve();
  const pdf = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(1024 - 16, 0x20), Buffer.from('\n%%EOF\n')]);
  const { body, contentType } = multipartBody(pdf);
  process.stderr.write(`limits: uploads, ${name}\n`);
  const result = await load({
    url: `${service.url}/v1/files`,
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': contentType },
    body,
    connections: UPLOAD_CONNECTIONS,
    expectStatus: 200,
    pid: service.pid,
  });
  return { name, result };
}

export async function limits(): Promise<string> {
  becomeLoadGenerator();
  const directResults = await directRows();
  const roundTrips = await roundTripRows();
  const uploads: UploadRow[] = [];
  const raised = { maxFiles: 1_000_000_000, maxStoredBytes: 1_000_000_000_000, ...HIGH };
  for (const redis of [false, true]) {
    const deployment = await createDeployment({ database: 'sqlite', redis, limits: raised });
    try {
      uploads.push(await uploadRow(redis ? 'gateway SQLite, limits on Redis' : 'gateway SQLite, limits in memory', deployment));
    } finally {
      await deployment.destroy();
    }
  }
  const base = uploads[0]?.result as LoadResult;
  return [
    `## Limits (${PINNING ? 'bench and load on core 1, server on core 0' : 'not pinned'})`,
    machine(),
    '',
    `CreationLimiter called directly, ${num(OPERATIONS)} operations over ${num(ACCOUNTS)} accounts:`,
    '',
    table(directResults, [
      { heading: 'limiter, operation', cell: (row) => row.name },
      { heading: 'µs/op (wall)', cell: (row) => num(row.wallMicros, 1), align: 'right' },
      { heading: 'gateway CPU µs/op', cell: (row) => num(row.cpuMicros, 1), align: 'right' },
      { heading: 'Redis server CPU µs/op', cell: (row) => (row.redisMicros === null ? '-' : num(row.redisMicros, 1)), align: 'right' },
    ]),
    '',
    `The model-call check, ${num(OPERATIONS)} one at a time on one connection (the bench process on the load core):`,
    '',
    table(roundTrips, [
      { heading: 'call', cell: (row) => row.name },
      { heading: 'p50 ms', cell: (row) => num(row.took.p50, 3), align: 'right' },
      { heading: 'p99 ms', cell: (row) => num(row.took.p99, 3), align: 'right' },
    ]),
    '',
    `Uploads of a 1 KiB PDF through the server, ${UPLOAD_CONNECTIONS} connections, ${DURATION} s:`,
    '',
    table(uploads, [
      { heading: 'case', cell: (row) => row.name },
      { heading: 'uploads/s', cell: (row) => num(row.result.requestsPerSecond), align: 'right' },
      { heading: 'vs memory', cell: (row) => ratio(row.result.requestsPerSecond, base.requestsPerSecond), align: 'right' },
      { heading: 'p50 ms', cell: (row) => num(row.result.p50, 1), align: 'right' },
      { heading: 'p99 ms', cell: (row) => num(row.result.p99, 1), align: 'right' },
      { heading: 'server CPU µs/upload', cell: (row) => num(row.result.cpuMicrosPerRequest), align: 'right' },
      { heading: 'unexpected', cell: (row) => num(row.result.failures), align: 'right' },
    ]),
  ].join('\n');
}

if (isMain(import.meta.url)) console.log(await limits());
