/**
 * A gateway process starting on the database named by its argument (a Knex config as JSON), for
 * the migrations of test/stores/knex-plumbing.test.ts: connects, prints `ready`, waits for a line
 * on stdin, migrates.
 */
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import knexFactory from 'knex';
import { migrate } from '../../lib/stores/knex/migrations.js';

const knex = knexFactory(JSON.parse(process.argv[2] ?? '{}'));
try {
  await knex.raw('select 1'); // connected before the start signal
  const lines = createInterface({ input: process.stdin });
  process.stdout.write('ready\n');
  await once(lines, 'line');
  lines.close();
  await migrate(knex);
} finally {
  await knex.destroy();
}
