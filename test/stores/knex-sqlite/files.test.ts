import { fileURLToPath } from 'node:url';
import test from 'ava';
import type { Knex } from 'knex';
import type { FileRecord, StockLimits } from '../../../lib/files/file-store.js';
import { newFileId } from '../../../lib/files/file-id.js';
import { KnexFileStore } from '../../../lib/stores/knex/file-store.js';
import { fileStoreContract } from '../../../lib/testing/file-store-contract.js';
import { contractStores } from '../../helpers/contract-stores.js';
import { sqliteDatabase } from '../../helpers/services.js';
import { runTogether } from '../../helpers/worker-processes.js';

// The file store's contract on the Knex store on SQLite, and processes creating files in one
// SQLite file at once; the other families in the files beside this one.

const stores = contractStores(test);

const seed = { seed: stores.seedFiles };
fileStoreContract(test, 'sqlite KnexFileStore', () => stores.fileStore(sqliteDatabase), seed);
fileStoreContract(test, 'sqlite KnexFileStore, prepared reads', () => stores.fileStore(sqliteDatabase, { prepared: true }), seed);

const WORKER = fileURLToPath(new URL('../../helpers/file-store-worker.js', import.meta.url));

/** Runs `create` for each batch in a process of its own, all released at the same moment. */
async function createInProcesses(config: Knex.Config, batches: FileRecord[][], limits: StockLimits, now: number) {
  const outputs = await runTogether(
    WORKER,
    batches.map((files) => [JSON.stringify({ config, files, limits, now })]),
  );
  return outputs.flatMap((output) => JSON.parse(output) as (boolean | string)[]);
}

const NOW = 1_800_000_000;
const file = (account: string, bytes: number): FileRecord => ({
  id: newFileId(NOW),
  account,
  filename: 'report.pdf',
  bytes,
  createdAt: NOW,
  expiresAt: null,
});

test('sqlite: four processes creating at once create exactly maxFiles, without a busy error', async (t) => {
  const db = await stores.migratedDatabase(sqliteDatabase);
  const batches = Array.from({ length: 4 }, () => Array.from({ length: 25 }, () => file('acme', 10)));
  const results = await createInProcesses(db.config, batches, { maxFiles: 30, maxBytes: 1_000_000 }, NOW);
  t.deepEqual(
    results.filter((result) => typeof result === 'string'),
    [],
  );
  t.is(results.filter((result) => result === true).length, 30);
  t.deepEqual(await new KnexFileStore(db.knex).usage('acme', NOW), { files: 30, bytes: 300 });
});

test('sqlite: four processes creating at once never push an account over maxBytes', async (t) => {
  const db = await stores.migratedDatabase(sqliteDatabase);
  const limits = { maxFiles: 1000, maxBytes: 5000 };
  const batches = Array.from({ length: 4 }, (_, b) => Array.from({ length: 25 }, (_, i) => file('acme', 1 + (((b * 25 + i) * 37) % 200))));
  const results = await createInProcesses(db.config, batches, limits, NOW);
  t.deepEqual(
    results.filter((result) => typeof result === 'string'),
    [],
  );
  const sizes = batches.flat().map((created) => created.bytes);
  const createdBytes = sizes.filter((_, i) => results[i] === true).reduce((sum, bytes) => sum + bytes, 0);
  const usage = await new KnexFileStore(db.knex).usage('acme', NOW);
  t.is(usage.bytes, createdBytes);
  t.true(usage.bytes <= limits.maxBytes, `${usage.bytes} bytes kept`);
  for (const [i, bytes] of sizes.entries()) {
    if (results[i] === false) t.true(usage.bytes + bytes > limits.maxBytes, `a file of ${bytes} bytes was refused needlessly`);
  }
});
