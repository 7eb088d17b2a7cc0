/**
 * SQLite checkpoints: how long a usage batch insert holds the event loop on the embedded
 * database, with SQLite checkpointing the WAL inside the commit that fills it (its default, and
 * the CLI's) against a worker thread checkpointing it every second (the reference server's).
 * Each case: BENCH_CHECKPOINT_INSERTS (3,000) inserts of 20 records, as the server batches them
 * on SQLite, 1 ms apart, in a fresh database; the cases alternate, twice each.
 * Run: node --import tsx bench/sqlite-checkpoints.ts
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { KnexUsageStore } from '../lib/stores/knex/usage-store.js';
import type { UsageRecord } from '../lib/usage/usage-store.js';
import { openMigratedDatabase } from '../reference-server/database.js';
import { isMain } from './lib/processes.js';
import { machine } from './lib/system.js';
import { num, table } from './lib/table.js';

const INSERTS = Number(process.env.BENCH_CHECKPOINT_INSERTS ?? 3000);
const BATCH = 20;

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
  };
}

/** Milliseconds each insert took, sorted. */
async function inserts(walCheckpointMs: number | undefined): Promise<number[]> {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-bench-checkpoints-'));
  const database = await openMigratedDatabase(
    { client: 'sqlite', filename: join(dir, 'gateway.sqlite') },
    walCheckpointMs === undefined ? {} : { walCheckpointMs, log: (level, message) => console.error(`${level}: ${message}`) },
  );
  const store = new KnexUsageStore(database.knex, database.storeOptions);
  const took: number[] = [];
  try {
    for (let i = 0; i < INSERTS; i++) {
      const batch = Array.from({ length: BATCH }, (_, j) => record(i * BATCH + j));
      const startedAt = performance.now();
      await store.insert(batch);
      took.push(performance.now() - startedAt);
      await delay(1);
    }
  } finally {
    await database.close();
    await rm(dir, { recursive: true, force: true });
  }
  return took.sort((a, b) => a - b);
}

const at = (sorted: number[], quantile: number) => sorted[Math.min(sorted.length - 1, Math.floor(quantile * sorted.length))] ?? NaN;

interface Row {
  round: number;
  checkpoint: string;
  took: number[];
}

export async function checkpoints(): Promise<string> {
  const rows: Row[] = [];
  for (const round of [1, 2]) {
    for (const [checkpoint, walCheckpointMs] of [
      ['in the commit (SQLite default)', undefined],
      ['worker thread, every 1 s (server)', 1000],
    ] as const) {
      rows.push({ round, checkpoint, took: await inserts(walCheckpointMs) });
    }
  }
  const quantile = (heading: string, q: number) => ({ heading, align: 'right' as const, cell: (row: Row) => num(at(row.took, q), 2) });
  return [
    `## SQLite checkpoints (${num(INSERTS)} inserts of ${BATCH} usage records per case, 1 ms apart)`,
    '',
    machine(),
    '',
    table(rows, [
      { heading: 'round', cell: (row) => String(row.round) },
      { heading: 'checkpoint', cell: (row) => row.checkpoint },
      quantile('p50 ms', 0.5),
      quantile('p99 ms', 0.99),
      quantile('p99.9 ms', 0.999),
      quantile('max ms', 1),
      { heading: 'inserts over 3 ms', align: 'right', cell: (row) => num(row.took.filter((value) => value > 3).length) },
    ]),
  ].join('\n');
}

if (isMain(import.meta.url)) console.log(await checkpoints());
