/**
 * SQLite usage writes: what writing usage records costs a server on the embedded database, and how
 * long it holds the event loop. Cases: the batch inserts on Knex's connection, on the event loop,
 * 20 records each (the reference server before its writer thread) or 100 (the recorder's
 * default), with SQLite checkpointing the WAL in the commits that fill it; and the reference
 * server's `sqliteWriter` (100 per insert, run and checkpointed by its worker thread). Each case
 * writes BENCH_SQLITE_RECORDS (60,000) records in a fresh database, a batch every 20 records' worth
 * of 1 ms (as 20,000 calls a second would), the cases alternating, twice each. Figures: the
 * process's CPU per record (every thread), the event loop's busy time per record, and how late a
 * timer due every millisecond ran (`monitorEventLoopDelay`): what a request arriving meanwhile waits.
 * Run: node --import tsx bench/sqlite-writes.ts
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { KnexUsageStore } from '../lib/stores/knex/usage-store.js';
import type { UsageRecord } from '../lib/usage/usage-store.js';
import { openMigratedDatabase } from '../reference-server/database.js';
import { isMain } from './lib/processes.js';
import { machine } from './lib/system.js';
import { num, table } from './lib/table.js';

const RECORDS = Number(process.env.BENCH_SQLITE_RECORDS ?? 60_000);
/** The pause after each 20 records' worth of inserts, in ms. */
const PACE_MS = 1;

function record(sequence: number): UsageRecord {
  return {
    time: Date.now(),
    requestId: `req_${String(sequence).padStart(32, '0')}`,
    keyId: 'key_bench',
    account: 'acme',
    endpoint: '/v1/chat/completions',
    model: 'bench-gpt',
    provider: 'openai',
    status: 200,
    stream: false,
    inputTokens: 12,
    outputTokens: 48,
    attachments: 0,
    latencyMs: 0.5 + (sequence % 7) / 10,
    upstreamFirstByteMs: 0.25,
    upstreamMs: 0.4,
    costPicoUsd: 4_500_000,
  };
}

interface Case {
  name: string;
  batch: number;
  /** The reference server's writer thread (and its checkpoints), or Knex's connection alone. */
  writer: boolean;
}

const CASES: Case[] = [
  { name: "Knex's connection (event loop), 20 per insert", batch: 20, writer: false },
  { name: "Knex's connection (event loop), 100 per insert", batch: 100, writer: false },
  { name: 'writer thread (server), 100 per insert', batch: 100, writer: true },
];

interface Row {
  round: number;
  name: string;
  cpuMicrosPerRecord: number;
  loopMicrosPerRecord: number;
  /** Timer lateness, ms. */
  delayP99: number;
  delayMax: number;
}

async function measure(round: number, { name, batch, writer }: Case): Promise<Row> {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-bench-sqlite-'));
  const database = await openMigratedDatabase({ client: 'sqlite', filename: join(dir, 'gateway.sqlite') }, writer ? { writerCheckpointMs: 1000 } : {});
  const store = new KnexUsageStore(database.knex, database.storeOptions);
  const delays = monitorEventLoopDelay({ resolution: 1 });
  try {
    await store.insert([record(-1)]);
    const cpuBefore = process.cpuUsage();
    const loopBefore = performance.eventLoopUtilization();
    delays.enable();
    for (let written = 0; written < RECORDS; written += batch) {
      const inserted = store.insert(Array.from({ length: batch }, (_, index) => record(written + index)));
      await delay((PACE_MS * batch) / 20);
      await inserted;
    }
    delays.disable();
    const loop = performance.eventLoopUtilization(loopBefore);
    const cpu = process.cpuUsage(cpuBefore);
    return {
      round,
      name,
      cpuMicrosPerRecord: (cpu.user + cpu.system) / RECORDS,
      loopMicrosPerRecord: (loop.active * 1000) / RECORDS,
      delayP99: delays.percentile(99) / 1e6,
      delayMax: delays.max / 1e6,
    };
  } finally {
    await database.close();
    await rm(dir, { recursive: true, force: true });
  }
}

export async function sqliteWrites(): Promise<string> {
  const rows: Row[] = [];
  for (const round of [1, 2]) {
    for (const writesCase of CASES) rows.push(await measure(round, writesCase));
  }
  return [
    `## SQLite usage writes (${num(RECORDS)} records per case, a batch every 20 records' worth of ${PACE_MS} ms)`,
    '',
    machine(),
    '',
    table(rows, [
      { heading: 'round', cell: (row) => String(row.round) },
      { heading: 'inserts', cell: (row) => row.name },
      { heading: 'CPU µs/record (all threads)', align: 'right', cell: (row) => num(row.cpuMicrosPerRecord, 1) },
      { heading: 'event loop busy µs/record', align: 'right', cell: (row) => num(row.loopMicrosPerRecord, 1) },
      { heading: 'timer late p99 ms', align: 'right', cell: (row) => num(row.delayP99, 2) },
      { heading: 'max ms', align: 'right', cell: (row) => num(row.delayMax, 2) },
    ]),
  ].join('\n');
}

if (isMain(import.meta.url)) console.log(await sqliteWrites());
