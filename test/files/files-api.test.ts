import { mkdtemp, readdir, readFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import test, { type ExecutionContext, type TestFn } from 'ava';
import { StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { isFileId, newFileId } from '../../lib/files/file-id.js';
import type { FileRecord, StockLimits } from '../../lib/files/file-store.js';
import { filesRouter, type FilesRouterOptions } from '../../lib/files/files-router.js';
import { pdfUpload, type PdfUploadOptions } from '../../lib/files/pdf-upload.js';
import { sweep, type SweepOptions } from '../../lib/files/sweep.js';
import { FsBlobStore, type FsBlobStoreOptions } from '../../lib/stores/fs/blob-store.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { filesApiSuite, filesRequestSuite } from '../helpers/files-api-suite.js';
import { filesApp, type FilesAppOptions } from '../helpers/files-app.js';
import { knexStores, memoryStores, type Stores } from '../helpers/file-stores.js';
import { multipart, pdfOf, uploadParts } from '../helpers/multipart.js';
import { postgresDatabase, sqliteDatabase, withPostgres } from '../helpers/services.js';

// The files API on every store, then what lies under it: filesRouter()'s and pdfUpload()'s
// options, file ids, the sweep of expired and orphaned files, and an upload moved into place on
// the filesystem store.

filesRequestSuite(test);
filesApiSuite(test, 'memory', memoryStores);
filesApiSuite(test, 'sqlite + fs', () => knexStores(sqliteDatabase));
filesApiSuite(withPostgres(test), 'postgres + fs', () => knexStores(postgresDatabase));

test('filesRouter() refuses missing stores and bad limits when it is made, not at request time', (t) => {
  const files = new MemoryFileStore();
  const blobs = new MemoryBlobStore();
  t.throws(() => filesRouter({ blobs } as unknown as FilesRouterOptions), {
    instanceOf: TypeError,
    message: 'koa-model-gateway: filesRouter() needs a FileStore as `files`',
  });
  t.throws(() => filesRouter({ files } as unknown as FilesRouterOptions), {
    instanceOf: TypeError,
    message: 'koa-model-gateway: filesRouter() needs a BlobStore as `blobs`',
  });
  t.throws(() => filesRouter({ files, blobs, limits: { maxFiles: 0 } }), {
    instanceOf: TypeError,
    message: 'koa-model-gateway: filesRouter limits.maxFiles must be a positive integer',
  });
  t.notThrows(() => filesRouter({ files, blobs }));
});

test('sweep() without its stores is a TypeError naming what it needs', async (t) => {
  await t.throwsAsync(sweep({} as SweepOptions), { instanceOf: TypeError, message: 'koa-model-gateway: sweep() needs a FileStore as `files`' });
});

test('pdfUpload() refuses an uploadFields that is not a function of ctx when it is made', (t) => {
  t.throws(() => pdfUpload({ uploadFields: 'anthropic' } as unknown as PdfUploadOptions), {
    instanceOf: TypeError,
    message: 'koa-model-gateway: pdfUpload(): uploadFields must be a function of ctx',
  });
});

// File ids: newFileId() keeps the last id it issued in this worker. The other tests of this file ask
// for ids of the present time, before the times these tests use (from 2033 on, the `horizon`).

// Sorting strings of ASCII compares their bytes.
const byteOrder = (ids: string[]) => [...ids].sort();
let horizon = 2_000_000_000_000;
/** A time in ms later than that of every id asked for in this worker, with room for 100,000 ms after it. */
const unusedTime = () => (horizon += 100_000);
/** Ids asked for one after another, one per time in `times` (Unix seconds). */
const idsAt = (times: number[]) => times.map((seconds) => newFileId(seconds));

// Ids issued before the id had milliseconds, at 2025-01-01, 2026-09-21 and 2038-01-19 (the last
// second of that format's `0`): the creation second in 6 characters, then 26 random ones.
const FIRST_FORMAT = ['file-0bS7L-JcRpzmNvEljOGwmIBxw1_mwdgj', 'file-0egIi-VitEwPGD7KhKIop21FI_86dIkU', 'file-0zzzzzWXsUfuu9-3LZTQZtTNj7FdKsS1'];

test('ids of the first format stay valid and sort before every new id', (t) => {
  const fresh = newFileId(Date.now() / 1000);
  t.true(isFileId(fresh));
  for (const old of FIRST_FORMAT) {
    t.true(isFileId(old), old);
    t.true(old < fresh, old);
  }
  t.true(
    FIRST_FORMAT.every((old) => old < newFileId(1_000_000_000)),
    'even for a new id of a time before theirs',
  );
});

test('ids asked for in a tight loop are strictly increasing and all different', (t) => {
  const ids = Array.from({ length: 20_000 }, () => newFileId(Date.now() / 1000));
  t.true(ids.every(isFileId));
  for (let i = 1; i < ids.length; i++) {
    if (!((ids[i - 1] as string) < (ids[i] as string))) t.fail(`id ${i} does not follow id ${i - 1}`);
  }
  t.is(new Set(ids).size, ids.length);
});

test('the time part has millisecond resolution: ids one millisecond apart sort by time, whatever the order asked', (t) => {
  const base = unusedTime();
  const first = newFileId((base + 1) / 1000);
  const second = newFileId((base + 2) / 1000);
  t.true(first < second);
  t.true(first.startsWith('file-1'), 'the mark of the millisecond format');
  t.not(first.slice(6, 14), second.slice(6, 14), 'the time characters differ by one millisecond');
  t.is(first.slice(6, 13), second.slice(6, 13), 'only in the last time character');
});

test('an id asked for with a time before the last one still sorts after it (a clock that stepped back)', (t) => {
  const time = unusedTime();
  const later = newFileId(time / 1000);
  const earlier = newFileId((time - 500) / 1000);
  t.true(later < earlier);
  t.is(earlier.slice(0, 14), later.slice(0, 14), 'it keeps the time of the last id');
});

test('decisions.md Files: ids carry 138 random bits: each of the last 23 characters takes every value', (t) => {
  // Ids of different milliseconds, so that each random part is drawn afresh.
  const start = unusedTime();
  const ids = idsAt(Array.from({ length: 2000 }, (_, i) => (start + i) / 1000));
  t.deepEqual(ids, byteOrder(ids));
  for (let position = 14; position < 37; position++) {
    const seen = new Set(ids.map((id) => id[position]));
    // 2,000 draws of a uniform character from 64 miss one with probability below 1e-11.
    t.is(seen.size, 64, `position ${position} takes every character`);
  }
});

test('ids within one millisecond are not the last one plus one: the step is random too', (t) => {
  const ms = unusedTime();
  const ids = idsAt(Array.from({ length: 200 }, () => ms / 1000));
  t.deepEqual(ids, byteOrder(ids));
  t.true(
    ids.every((id) => id.slice(0, 14) === ids[0]?.slice(0, 14)),
    'all of that millisecond',
  );
  // A step of 1 leaves characters 27 to 32 (bits 24 to 59 of the random part) as they were but
  // once in 2^24 ids; a random 64-bit step changes them but once in 2^40.
  for (let i = 1; i < ids.length; i++) {
    t.not(ids[i]?.slice(27, 33), ids[i - 1]?.slice(27, 33), `id ${i}`);
  }
});

test('a time no id can carry is refused', (t) => {
  for (const seconds of [-1, Number.NaN, Number.POSITIVE_INFINITY, 64 ** 8 / 1000]) {
    t.throws(() => newFileId(seconds), { instanceOf: RangeError }, String(seconds));
  }
});

// The sweep of expired files and orphaned blobs.
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
    const results = await Promise.all(processes.map(({ files, blobs }) => sweep({ files, blobs, nowMs: () => (now + GRACE + 60) * 1000, batchSize: 3 })));
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

// An upload moved into place on the filesystem store.
/** The files API on an FsBlobStore in a directory of its own. */
async function setup(t: ExecutionContext, options: FilesAppOptions = {}, blobOptions: Partial<FsBlobStoreOptions> = {}) {
  const directory = await mkdtemp(join(tmpdir(), 'kmg-upload-move-'));
  const app = await filesApp({ ...options, blobs: new FsBlobStore({ directory, ...blobOptions }) });
  t.teardown(async () => {
    await app.close();
    await rm(directory, { recursive: true, force: true });
  });
  return { app, blobDirectory: directory };
}

type FilesApp = Awaited<ReturnType<typeof filesApp>>;

async function upload(app: FilesApp, pdf: Buffer) {
  const { body, contentType } = multipart(uploadParts(pdf));
  const res = await fetch(`${app.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': contentType }, body });
  return { status: res.status, body: (await res.json()) as { id?: string; error?: { code: string } } };
}

/** `pdf` uploaded: the blob directory holds exactly its bytes under the new id, and no temp file is left. */
async function assertStored(t: ExecutionContext, app: FilesApp, blobDirectory: string, pdf: Buffer): Promise<void> {
  const created = await upload(app, pdf);
  t.is(created.status, 200);
  t.deepEqual(await readdir(blobDirectory), [created.body.id]);
  t.true((await readFile(join(blobDirectory, created.body.id ?? ''))).equals(pdf));
  t.deepEqual(await app.tempFiles(), []);
}

test('an upload on the filesystem store moves its temp file into place, with exactly the bytes sent', async (t) => {
  const moved: string[] = [];
  const { app, blobDirectory } = await setup(
    t,
    {},
    {
      rename: async (from, to) => {
        moved.push(dirname(from));
        await rename(from, to);
      },
    },
  );
  await assertStored(t, app, blobDirectory, pdfOf(300_000, 0x41));
  t.deepEqual(moved, [app.tempDir]);
  t.deepEqual(app.serverErrors, []);
});

test('blobs on another filesystem than the uploads (EXDEV): the bytes are copied, no temp file is left', async (t) => {
  const exdev = async () => {
    throw Object.assign(new Error('EXDEV: cross-device link not permitted'), { code: 'EXDEV' });
  };
  const { app, blobDirectory } = await setup(t, {}, { rename: exdev });
  await assertStored(t, app, blobDirectory, pdfOf(300_000, 0x42));
});

test('an upload refused by the kept limits after its bytes were moved leaves no blob', async (t) => {
  const { app, blobDirectory } = await setup(t, { limits: { maxFiles: 1 } });
  const first = await upload(app, pdfOf(1000));
  t.is(first.status, 200);
  t.is((await upload(app, pdfOf(1000))).body.error?.code, 'storage_quota_exceeded');
  t.deepEqual(await readdir(blobDirectory), [first.body.id]);
  t.deepEqual(await app.tempFiles(), []);
});

test('an upload whose metadata insert fails after its bytes were moved leaves no blob', async (t) => {
  class FailingFileStore extends MemoryFileStore {
    override async create(_file: FileRecord, _limits: StockLimits, _now: number): Promise<boolean> {
      throw new Error('database went away');
    }
  }
  const { app, blobDirectory } = await setup(t, { files: new FailingFileStore() });
  t.is((await upload(app, pdfOf(1000))).status, 500);
  t.deepEqual(await readdir(blobDirectory), []);
  t.deepEqual(await app.tempFiles(), []);
});

test('an upload whose creation fails with the store unavailable keeps its blob: the record may have committed, and then it serves', async (t) => {
  // The creation commits, then the store's answer is lost, as when a timeout strikes during COMMIT.
  class CommitLostFileStore extends MemoryFileStore {
    override async create(file: FileRecord, limits: StockLimits, now: number): Promise<boolean> {
      await super.create(file, limits, now);
      throw new StoreUnavailableError('the database did not answer within 5000 ms');
    }
  }
  const files = new CommitLostFileStore();
  const { app, blobDirectory } = await setup(t, { files });
  const pdf = pdfOf(1000);
  const refused = await upload(app, pdf);
  t.is(refused.status, 503);
  const [stored] = await readdir(blobDirectory);
  t.deepEqual(await files.existing([stored ?? '']), new Set([stored]));
  const content = await fetch(`${app.url}/v1/files/${stored}/content`, { headers: { authorization: `Bearer ${app.keys.a}` } });
  t.deepEqual(Buffer.from(await content.arrayBuffer()), pdf);
  t.deepEqual(await app.tempFiles(), []);
});
