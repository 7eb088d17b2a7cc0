import { mkdtemp, readdir, readFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import type { FileRecord, StockLimits } from '../../lib/files/file-store.js';
import { FsBlobStore, type FsBlobStoreOptions } from '../../lib/stores/fs/blob-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { filesApp, type FilesAppOptions } from '../helpers/files-app.js';
import { multipart, pdfOf, uploadParts } from '../helpers/multipart.js';

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
  const { app, blobDirectory } = await setup(t, {}, {
    rename: async (from, to) => {
      moved.push(dirname(from));
      await rename(from, to);
    },
  });
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
