import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { openDatabase } from '../../reference-server/database.js';

test('the embedded SQLite database runs in WAL mode, synced at checkpoints (synchronous = NORMAL), waiting on locks', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-db-'));
  const knex = openDatabase({ client: 'sqlite', filename: join(dir, 'gateway.sqlite') });
  try {
    const pragma = async (name: string) => ((await knex.raw(`pragma ${name}`)) as Array<Record<string, unknown>>)[0];
    t.deepEqual(await pragma('journal_mode'), { journal_mode: 'wal' });
    t.deepEqual(await pragma('synchronous'), { synchronous: 1 });
    t.deepEqual(await pragma('busy_timeout'), { timeout: 5000 });
  } finally {
    await knex.destroy();
    await rm(dir, { recursive: true, force: true });
  }
});
