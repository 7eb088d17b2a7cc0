import { mkdtemp, readdir, readlink, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { openMigratedDatabase, type DatabaseOptions } from '../../reference-server/database.js';
import { sqliteWriter, SqliteWriterGoneError } from '../../lib/stores/knex/sqlite-writer.js';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';

async function embedded(options: DatabaseOptions = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-db-'));
  const filename = join(dir, 'gateway.sqlite');
  const database = await openMigratedDatabase({ client: 'sqlite', filename }, options);
  return { filename, database, remove: () => rm(dir, { recursive: true, force: true }) };
}

test('the embedded SQLite database runs in WAL mode, synced at checkpoints (synchronous = NORMAL), waiting on locks', async (t) => {
  const { database, remove } = await embedded();
  try {
    const pragma = async (name: string) => ((await database.knex.raw(`pragma ${name}`)) as Array<Record<string, unknown>>)[0];
    t.deepEqual(await pragma('journal_mode'), { journal_mode: 'wal' });
    t.deepEqual(await pragma('synchronous'), { synchronous: 1 });
    t.deepEqual(await pragma('busy_timeout'), { timeout: 5000 });
  } finally {
    await database.close();
    await remove();
  }
});

/** The file descriptors of this process open on `filename`. */
async function openOn(filename: string): Promise<number> {
  const fds = await readdir('/proc/self/fd');
  const targets = await Promise.all(fds.map((fd) => readlink(join('/proc/self/fd', fd)).catch(() => '')));
  return targets.filter((target) => target === filename).length;
}

(process.platform === 'linux' ? test : test.skip)('the embedded database reads through a connection of its own, closed with the rest', async (t) => {
  const { filename, database, remove } = await embedded();
  try {
    const keys = new KnexKeyStore(database.knex, database.storeOptions);
    await keys.create({ account: 'acme', hash: 'a'.repeat(64), scopes: ['files:read'], models: null, expiresAt: null });
    t.like(await keys.findByHash('a'.repeat(64)), { account: 'acme' });
    t.is(await openOn(filename), 2, "Knex's connection and the reader");
    await database.close();
    t.is(await openOn(filename), 0);
  } finally {
    await remove();
  }
});

(process.platform === 'linux' ? test : test.skip)(
  'with writerCheckpointMs, commits leave the WAL to a writer thread, which copies it into the database and closes with the rest',
  async (t) => {
    const { filename, database, remove } = await embedded({ writerCheckpointMs: 20 });
    try {
      const { knex } = database;
      t.deepEqual(((await knex.raw('pragma wal_autocheckpoint')) as unknown[])[0], { wal_autocheckpoint: 0 }, 'no checkpoint inside a commit');
      await knex.schema.createTable('filler', (table) => table.text('text'));
      const before = (await stat(filename)).size;
      // 1 MiB in the WAL: 256 pages, below SQLite's own threshold of 1,000, so only the worker copies it.
      for (let i = 0; i < 16; i++) await knex('filler').insert({ text: 'x'.repeat(65_536) });
      const deadline = Date.now() + 10_000;
      while ((await stat(filename)).size < before + 1_048_576 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      t.true((await stat(filename)).size >= before + 1_048_576, 'the rows reached the database file');
      t.is(await openOn(filename), 3, "Knex's connection, the reader and the writer's");
      const usage = new KnexUsageStore(knex, database.storeOptions);
      await usage.insert([usageRecord()]);
      t.is((await usage.list()).length, 1, 'the usage store writes through the writer');
      await database.close();
      t.is(await openOn(filename), 0);
    } finally {
      await remove();
    }
  },
);

test('a writer thread that fails is reported once, and the writes sent to it fail as not run', async (t) => {
  const failures: Error[] = [];
  const writer = sqliteWriter(join(tmpdir(), 'kmg-no-such-dir', 'gateway.sqlite'), { checkpointIntervalMs: 20, onFailure: (err) => failures.push(err) });
  await t.throwsAsync(writer.prepare('insert into t values (?)')([1]), { instanceOf: SqliteWriterGoneError });
  await writer.close();
  t.is(failures.length, 1);
  t.regex(String(failures[0]?.message), /directory does not exist/);
});
