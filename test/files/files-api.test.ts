import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { FsBlobStore } from '../../lib/stores/fs/blob-store.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { filesApiSuite, type Stores } from '../helpers/files-api-suite.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';

/** A KnexFileStore on a fresh database, with an FsBlobStore in a temp dir of its own. */
async function knexStores(open: () => Promise<TestDatabase>): Promise<Stores> {
  const db = await open();
  await migrate(db.knex);
  const directory = await mkdtemp(join(tmpdir(), 'kmg-blobs-'));
  return {
    files: new KnexFileStore(db.knex),
    blobs: new FsBlobStore({ directory }),
    async close() {
      await db.destroy();
      await rm(directory, { recursive: true, force: true });
    },
  };
}

filesApiSuite(test, 'memory', async () => ({ files: new MemoryFileStore(), blobs: new MemoryBlobStore(), close: async () => undefined }));
filesApiSuite(test, 'sqlite + fs', () => knexStores(sqliteDatabase));
filesApiSuite(withPostgres(test), 'postgres + fs', () => knexStores(postgresDatabase));
