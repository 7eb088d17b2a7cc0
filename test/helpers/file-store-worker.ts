/**
 * A second process on the same SQLite database, for the cross-process tests of KnexFileStore:
 * run by `runTogether` (worker-processes.ts) with one JSON argument; creates every file at once
 * and prints one JSON line: per file, true, false or the error.
 */
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import knexFactory, { type Knex } from 'knex';
import type { FileRecord, StockLimits } from '../../lib/files/file-store.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';

interface Job {
  config: Knex.Config;
  files: FileRecord[];
  limits: StockLimits;
  now: number;
}

const job = JSON.parse(process.argv[2] ?? '') as Job;
// A lock that a loaded machine holds past the driver's 5 s would fail the test for the wrong
// reason. A minute keeps only the failure it is about: SQLite answers a transaction that read
// before it wrote "busy" at once, without waiting, when another holds the write lock.
const busyTimeout = (connection: { pragma(source: string): unknown }, done: (err: Error | null, connection: unknown) => void) => {
  connection.pragma('busy_timeout = 60000');
  done(null, connection);
};
const knex = knexFactory({ ...job.config, pool: { afterCreate: busyTimeout } });
const store = new KnexFileStore(knex);
await knex.raw('select 1'); // connected before the start signal

const lines = createInterface({ input: process.stdin });
process.stdout.write('ready\n');
await once(lines, 'line');
lines.close();

const settled = await Promise.allSettled(job.files.map((file) => store.create(file, job.limits, job.now)));
const results = settled.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : String(outcome.reason)));
process.stdout.write(`${JSON.stringify(results)}\n`);
await knex.destroy();
