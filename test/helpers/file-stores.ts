import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import type { BlobStore } from '../../lib/files/blob-store.js';
import type { FileStore } from '../../lib/files/file-store.js';
import { FsBlobStore } from '../../lib/stores/fs/blob-store.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import type { TestDatabase } from './services.js';

/** A FileStore and a BlobStore for one test, and how to make more views of the same data. */
export interface Stores {
  files: FileStore;
  blobs: BlobStore;
  /** The same data through a store of its own (a connection pool of its own), as another process would see it. */
  another(): { files: FileStore; blobs: BlobStore };
  close(): Promise<void>;
}

export async function memoryStores(): Promise<Stores> {
  const files = new MemoryFileStore();
  const blobs = new MemoryBlobStore();
  return { files, blobs, another: () => ({ files, blobs }), close: async () => undefined };
}

/** A KnexFileStore on a fresh database, with an FsBlobStore in a temp dir of its own. */
export async function knexStores(open: () => Promise<TestDatabase>): Promise<Stores> {
  const db = await open();
  await migrate(db.knex);
  const directory = await mkdtemp(join(tmpdir(), 'kmg-blobs-'));
  const pools: Knex[] = [];
  return {
    files: new KnexFileStore(db.knex),
    blobs: new FsBlobStore({ directory }),
    another() {
      const knex = knexFactory(db.config);
      pools.push(knex);
      return { files: new KnexFileStore(knex), blobs: new FsBlobStore({ directory }) };
    },
    async close() {
      await Promise.all(pools.map((knex) => knex.destroy()));
      await db.destroy();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
