// A separate process that migrates the database named by its argument (a Knex config as JSON),
// as a gateway process does at start-up.
import knexFactory from 'knex';
import { migrate } from '../../lib/stores/knex/migrations.js';

const knex = knexFactory(JSON.parse(process.argv[2] ?? '{}'));
try {
  await migrate(knex);
} finally {
  await knex.destroy();
}
