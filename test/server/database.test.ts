import { mkdtemp, readdir, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { openMigratedDatabase } from '../../reference-server/database.js';

async function embedded() {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-db-'));
  const filename = join(dir, 'gateway.sqlite');
  const database = await openMigratedDatabase({ client: 'sqlite', filename });
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
