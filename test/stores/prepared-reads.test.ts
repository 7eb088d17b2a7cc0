import test from 'ava';
import type { Knex } from 'knex';
import { firstRowReader, type PreparedReads } from '../../lib/stores/knex/prepared-reads.js';
import { preparedReadsOn, type TestPreparedReads } from '../helpers/prepared-reads.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';

const databases: TestDatabase[] = [];
const readers: TestPreparedReads[] = [];
test.after.always(async () => {
  await Promise.all(readers.map((reader) => reader.close()));
  await Promise.all(databases.map((db) => db.destroy()));
});

interface Row {
  id: string;
  name: string;
}

/** A table `things` of two rows, and prepared reads on its database. */
async function things(open: () => Promise<TestDatabase>): Promise<{ knex: Knex; reads: PreparedReads }> {
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
  const reader = preparedReadsOn(db);
  readers.push(reader);
  return { knex: db.knex, reads: reader.reads };
}

const byId = (knex: Knex, reads: PreparedReads) =>
  firstRowReader<[string], Row>(reads, (id: string) => knex<Row>('things').where({ id }).select('id', 'name'));

for (const [name, open, gate] of [
  ['sqlite', sqliteDatabase, test],
  ['postgres', postgresDatabase, withPostgres(test)],
] as const) {
  gate(`${name}: a read written as a Knex query answers one row or nothing, again and again`, async (t) => {
    const { knex, reads } = await things(open);
    const read = byId(knex, reads);
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
    const { knex, reads } = await things(open);
    const read = byId(knex, reads);
    t.deepEqual(await read('a'), { id: 'a', name: 'first' });
    await knex.schema.alterTable('things', (table) => table.string('colour'));
    t.deepEqual(await read('a'), { id: 'a', name: 'first' });
  });
}

test('a read whose arguments are not each exactly one binding is refused when it is made, not when it runs', async (t) => {
  const { knex, reads } = await things(sqliteDatabase);
  t.throws(() => firstRowReader(reads, (id: string) => knex('things').where({ id, name: id }).first('id')), {
    instanceOf: TypeError,
    message: /argument 0 of a prepared read is not one binding/,
  });
  t.throws(() => firstRowReader(reads, (id: string) => knex('things').where({ id: id.toUpperCase() }).first('id')), {
    instanceOf: TypeError,
  });
});

test('sqlite in WAL mode: a prepared read runs beside a transaction in progress and sees only what is committed', async (t) => {
  const wal = () =>
    sqliteDatabase({
      pool: {
        afterCreate(connection: { pragma(source: string): unknown }, done: (err: Error | null, connection: unknown) => void) {
          connection.pragma('journal_mode = WAL');
          done(null, connection);
        },
      },
    });
  const { knex, reads } = await things(wal);
  const read = byId(knex, reads);
  await knex.transaction(async (trx) => {
    await trx('things').insert({ id: 'c', name: 'uncommitted' });
    t.is(await read('c'), undefined);
    t.deepEqual(await read('a'), { id: 'a', name: 'first' });
  });
  t.deepEqual(await read('c'), { id: 'c', name: 'uncommitted' });
});
