import { readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import type { Knex } from 'knex';
import { preparedRead } from '../../lib/stores/knex/prepared-read.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';

const databases: TestDatabase[] = [];
test.after.always(async () => {
  await Promise.all(databases.map((db) => db.destroy()));
});

interface Row {
  id: string;
  name: string;
}

async function table(open: () => Promise<TestDatabase>): Promise<Knex> {
  const db = await open();
  databases.push(db);
  await db.knex.schema.createTable('things', (t) => {
    t.string('id').primary();
    t.string('name').notNullable();
  });
  await db.knex('things').insert([
    { id: 'a', name: 'first' },
    { id: 'b', name: 'second' },
  ]);
  return db.knex;
}

const byId = (knex: Knex) =>
  preparedRead(knex, 'things_by_id', 'select id, name from things where id = ?', (id: string) =>
    knex<Row>('things').where({ id }).first('id', 'name'),
  );

for (const [name, open, gate] of [
  ['sqlite', sqliteDatabase, test],
  ['postgres', postgresDatabase, withPostgres(test)],
] as const) {
  gate(`${name}: reads one row or nothing, again and again on the same prepared statement`, async (t) => {
    const read = byId(await table(open));
    t.deepEqual(await read('a'), { id: 'a', name: 'first' });
    t.deepEqual(await read('b'), { id: 'b', name: 'second' });
    t.is(await read('missing'), undefined);
    t.deepEqual(await Promise.all(['a', 'b', 'a'].map((id) => read(id))), [
      { id: 'a', name: 'first' },
      { id: 'b', name: 'second' },
      { id: 'a', name: 'first' },
    ]);
  });

  gate(`${name}: a column added after the statement was prepared does not break it`, async (t) => {
    const knex = await table(open);
    const read = byId(knex);
    t.deepEqual(await read('a'), { id: 'a', name: 'first' });
    await knex.schema.alterTable('things', (table) => table.string('colour'));
    t.deepEqual(await read('a'), { id: 'a', name: 'first' });
  });

  gate(`${name}: inside a transaction it reads through the transaction, and sees its writes`, async (t) => {
    const knex = await table(open);
    await knex.transaction(async (trx) => {
      await trx('things').insert({ id: 'c', name: 'uncommitted' });
      t.deepEqual(await byId(trx)('c'), { id: 'c', name: 'uncommitted' });
    });
  });
}

/** A SQLite file in WAL mode, set as a deployment sets it: in the pool's `afterCreate`. */
const walDatabase = () =>
  sqliteDatabase({
    // Through the pool, a read inside a transaction would wait for its own connection: fail fast.
    acquireConnectionTimeout: 2000,
    pool: {
      afterCreate(connection: { pragma(source: string): unknown }, done: (err: Error | null, connection: unknown) => void) {
        connection.pragma('journal_mode = WAL');
        done(null, connection);
      },
    },
  });

test('sqlite in WAL mode: a read runs beside a transaction in progress and sees only what is committed', async (t) => {
  const knex = await table(walDatabase);
  const read = byId(knex);
  t.deepEqual(await read('a'), { id: 'a', name: 'first' });
  await knex.transaction(async (trx) => {
    await trx('things').insert({ id: 'c', name: 'uncommitted' });
    t.is(await read('c'), undefined);
  });
  t.deepEqual(await read('c'), { id: 'c', name: 'uncommitted' });
});

/** The file descriptors of this process open on `filename`. */
async function openOn(filename: string): Promise<number> {
  const fds = await readdir('/proc/self/fd');
  const targets = await Promise.all(fds.map((fd) => readlink(join('/proc/self/fd', fd)).catch(() => '')));
  return targets.filter((target) => target === filename).length;
}

(process.platform === 'linux' ? test : test.skip)('sqlite in WAL mode: the reading connection is closed with the pool', async (t) => {
  const knex = await table(walDatabase);
  const { filename } = knex.client.config.connection as { filename: string };
  await byId(knex)('a');
  t.is(await openOn(filename), 2, "the pool's connection and the reader");
  await knex.destroy();
  t.is(await openOn(filename), 0);
});
