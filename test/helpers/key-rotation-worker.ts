/**
 * A process of its own on a shared database, for the cross-process tests of `KnexKeyStore.rotate`:
 * run by `runTogether` (worker-processes.ts) with one JSON argument; rotates the key `count` times
 * at once and prints one JSON line: each rotation's outcome, or its error.
 */
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import knexFactory, { type Knex } from 'knex';
import { hashApiKey } from '../../lib/auth/keys.js';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';

interface Job {
  config: Knex.Config;
  id: string;
  count: number;
  nowSeconds: number;
}

const job = JSON.parse(process.argv[2] ?? '') as Job;
const knex = knexFactory(job.config);
const store = new KnexKeyStore(knex);
await knex.raw('select 1'); // connected before the start signal

const lines = createInterface({ input: process.stdin });
process.stdout.write('ready\n');
await once(lines, 'line');
lines.close();

const settled = await Promise.allSettled(
  Array.from({ length: job.count }, (_, i) =>
    store.rotate(job.id, {
      hash: hashApiKey(`kmg_sk_${process.pid}_${i}_${Math.random()}`),
      nowSeconds: job.nowSeconds,
      graceEndsAt: Math.floor(job.nowSeconds) + 60,
    }),
  ),
);
const results = settled.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value.outcome : String(outcome.reason)));
process.stdout.write(`${JSON.stringify(results)}\n`);
await knex.destroy();
