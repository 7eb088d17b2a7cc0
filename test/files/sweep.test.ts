import { Readable } from 'node:stream';
import test, { type ExecutionContext, type TestFn } from 'ava';
import { newFileId } from '../../lib/files/file-id.js';
import type { FileRecord } from '../../lib/files/file-store.js';
import { sweep } from '../../lib/files/sweep.js';
import { knexStores, memoryStores, type Stores } from '../helpers/file-stores.js';
import { filesApp } from '../helpers/files-app.js';
import { multipart, pdfOf, uploadParts } from '../helpers/multipart.js';
import { postgresDatabase, sqliteDatabase, withPostgres } from '../helpers/services.js';

const ROOMY = { maxFiles: 1_000_000, maxBytes: Number.MAX_SAFE_INTEGER };
const GRACE = 3600;

async function blobIds(stores: Pick<Stores, 'blobs'>): Promise<string[]> {
  const ids: string[] = [];
  for await (const blob of stores.blobs.list()) ids.push(blob.id);
  return ids.sort();
}

async function existing(stores: Pick<Stores, 'files'>, ids: string[]): Promise<string[]> {
  return [...(await stores.files.existing(ids))].sort();
}

function sweepSuite(test: TestFn, name: string, makeStores: () => Promise<Stores>): void {
  async function setup(t: ExecutionContext) {
    const stores = await makeStores();
    t.teardown(() => stores.close());
    // Blobs carry the real time they were written; records are placed around it.
    const now = Math.floor(Date.now() / 1000);
    const add = async (expiresAt: number | null, { blob = true, record = true } = {}) => {
      const file: FileRecord = { id: newFileId(now), account: 'acme', filename: 'a.pdf', bytes: 3, createdAt: now, expiresAt };
      if (blob) await stores.blobs.put(file.id, Readable.from([Buffer.from('pdf')]));
      if (record && !(await stores.files.create(file, ROOMY, now))) throw new Error('not created');
      return file.id;
    };
    return { stores, now, add };
  }

  test(`${name}: removes expired files, record and bytes, and keeps live ones`, async (t) => {
    const { stores, now, add } = await setup(t);
    const expired = [await add(now + 10), await add(now + 20), await add(now + 30)];
    const live = [await add(null), await add(now + 31)];
    const result = await sweep({ files: stores.files, blobs: stores.blobs, nowMs: () => (now + 30) * 1000, batchSize: 2 });
    t.deepEqual(result, { expired: 3, orphans: 0 });
    t.deepEqual(await blobIds(stores), [...live].sort());
    t.deepEqual(await existing(stores, [...expired, ...live]), [...live].sort());
  });

  test(`${name}: removes blobs without a record only once they are older than the grace period`, async (t) => {
    const { stores, now, add } = await setup(t);
    const orphan = await add(null, { record: false });
    const kept = await add(null);
    t.deepEqual(await sweep({ files: stores.files, blobs: stores.blobs, nowMs: () => (now + GRACE - 5) * 1000 }), { expired: 0, orphans: 0 });
    t.deepEqual(await blobIds(stores), [orphan, kept].sort(), 'a young orphan may still be an upload in progress');
    const result = await sweep({ files: stores.files, blobs: stores.blobs, nowMs: () => (now + GRACE + 5) * 1000, orphanGraceSeconds: GRACE, batchSize: 1 });
    t.deepEqual(result, { expired: 0, orphans: 1 });
    t.deepEqual(await blobIds(stores), [kept]);
  });

  test(`${name}: sweeps running at once in several processes remove everything once, and nothing else`, async (t) => {
    const { stores, now, add } = await setup(t);
    const expired = await Promise.all(Array.from({ length: 12 }, (_, i) => add(now + i)));
    const orphans = await Promise.all(Array.from({ length: 5 }, () => add(null, { record: false })));
    const live = await Promise.all(Array.from({ length: 4 }, () => add(null)));
    const processes = [stores, stores.another(), stores.another(), stores.another()];
    const results = await Promise.all(
      processes.map(({ files, blobs }) => sweep({ files, blobs, nowMs: () => (now + GRACE + 60) * 1000, batchSize: 3 })),
    );
    t.true(results.reduce((sum, result) => sum + result.expired, 0) >= expired.length);
    t.deepEqual(await blobIds(stores), [...live].sort());
    t.deepEqual(await existing(stores, [...expired, ...orphans, ...live]), [...live].sort());
  });
}

sweepSuite(test, 'memory', memoryStores);
sweepSuite(test, 'sqlite + fs', () => knexStores(sqliteDatabase));
sweepSuite(withPostgres(test), 'postgres + fs', () => knexStores(postgresDatabase));

test('after a sweep an expired upload is gone for good, its usage already freed before it', async (t) => {
  const stores = await memoryStores();
  const app = await filesApp({ files: stores.files, blobs: stores.blobs });
  t.teardown(() => app.close());
  const { body, contentType } = multipart(
    uploadParts(pdfOf(1000), 'a.pdf', [
      { name: 'expires_after[anchor]', value: 'created_at' },
      { name: 'expires_after[seconds]', value: '3600' },
    ]),
  );
  const res = await fetch(`${app.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': contentType }, body });
  const { id } = (await res.json()) as { id: string };
  app.clock.seconds += 3600;
  t.deepEqual(await stores.files.usage('acct-a', app.clock.seconds), { files: 0, bytes: 0 });
  t.deepEqual(await blobIds(stores), [id], 'the bytes stay until a sweep');
  t.deepEqual(await sweep({ files: stores.files, blobs: stores.blobs, nowMs: () => app.clock.seconds * 1000 }), { expired: 1, orphans: 0 });
  t.deepEqual(await blobIds(stores), []);
  t.deepEqual(await existing(stores, [id]), []);
});

test('bad sweep options are refused', async (t) => {
  const { files, blobs } = await memoryStores();
  await t.throwsAsync(sweep({ files, blobs, batchSize: 0 }), { instanceOf: TypeError, message: /batchSize/ });
  await t.throwsAsync(sweep({ files, blobs, orphanGraceSeconds: -1 }), { instanceOf: TypeError, message: /orphanGraceSeconds/ });
});
