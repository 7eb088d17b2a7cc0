import { randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import test from 'ava';
import { newFileId } from '../../lib/files/file-id.js';
import { FsBlobStore } from '../../lib/stores/fs/blob-store.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { blobStoreContract, failingStream, putFileContract, readAll } from '../../lib/testing/blob-store-contract.js';

const directories: string[] = [];
test.after.always(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

/** A fresh temp directory; the blobs go in a subdirectory that does not exist yet. */
async function tempDirectory(): Promise<{ root: string; blobs: string }> {
  const root = await mkdtemp(join(tmpdir(), 'kmg-blobs-'));
  directories.push(root);
  return { root, blobs: join(root, 'blobs') };
}

blobStoreContract(test, 'memory', async () => new MemoryBlobStore());
blobStoreContract(test, 'fs', async () => new FsBlobStore({ directory: (await tempDirectory()).blobs }));
putFileContract(test, 'fs', async () => new FsBlobStore({ directory: (await tempDirectory()).blobs }));
// Every copy a rename across filesystems falls back to, on one filesystem.
putFileContract(test, 'fs, across filesystems', async () => new FsBlobStore({ directory: (await tempDirectory()).blobs, rename: failsWith('EXDEV') }));

const bytesOf = (text: string) => Readable.from([Buffer.from(text)]);

/** A rename that fails as the kernel does, with an errno code. */
function failsWith(code: string) {
  return async (from: string, to: string) => {
    throw Object.assign(new Error(`${code}: rename '${from}' -> '${to}'`), { code });
  };
}

/** A finished upload's temp file in `root`, outside the blob directory. */
async function uploadFile(root: string, text: string): Promise<string> {
  const path = join(root, 'kmg-upload-1');
  await writeFile(path, text);
  return path;
}

test('fs: putFile moves the file into place: the source is gone and only the blob remains', async (t) => {
  const { root, blobs } = await tempDirectory();
  const store = new FsBlobStore({ directory: blobs });
  const id = newFileId(Date.now() / 1000);
  const source = await uploadFile(root, '%PDF-1.7 moved');
  const { ino } = await stat(source);
  t.is(await store.putFile(id, source), 14);
  t.deepEqual(await readdir(blobs), [id]);
  t.is((await stat(join(blobs, id))).ino, ino, 'renamed, not copied');
  await t.throwsAsync(stat(source), { code: 'ENOENT' });
});

test('fs: putFile across filesystems (EXDEV) copies the bytes, then removes the source', async (t) => {
  const { root, blobs } = await tempDirectory();
  const store = new FsBlobStore({ directory: blobs, rename: failsWith('EXDEV') });
  const id = newFileId(Date.now() / 1000);
  const source = await uploadFile(root, '%PDF-1.7 copied');
  t.is(await store.putFile(id, source), 15);
  t.deepEqual(await readdir(blobs), [id]);
  t.is((await readFile(join(blobs, id))).toString(), '%PDF-1.7 copied');
  await t.throwsAsync(stat(source), { code: 'ENOENT' });
});

test('fs: a putFile whose rename fails otherwise rejects with that error and leaves the source to its owner', async (t) => {
  const { root, blobs } = await tempDirectory();
  const store = new FsBlobStore({ directory: blobs, rename: failsWith('EACCES') });
  const id = newFileId(Date.now() / 1000);
  const source = await uploadFile(root, '%PDF-1.7');
  await t.throwsAsync(store.putFile(id, source), { code: 'EACCES' });
  t.deepEqual(await readdir(blobs), []);
  t.is((await readFile(source)).toString(), '%PDF-1.7');
});

// A real second filesystem where the machine has one (/dev/shm is usually tmpfs); the stubbed
// rename above covers the same path everywhere.
const otherFilesystem = existsSync('/dev/shm') && statSync('/dev/shm').dev !== statSync(tmpdir()).dev;
(otherFilesystem ? test : test.skip)('fs: putFile from another filesystem (/dev/shm) really copies', async (t) => {
  const { blobs } = await tempDirectory();
  const shm = await mkdtemp('/dev/shm/kmg-blobs-');
  directories.push(shm);
  const store = new FsBlobStore({ directory: blobs });
  const id = newFileId(Date.now() / 1000);
  const bytes = randomBytes(300_000);
  const source = join(shm, 'upload');
  await writeFile(source, bytes);
  t.is(await store.putFile(id, source), bytes.length);
  t.true((await readFile(join(blobs, id))).equals(bytes));
  t.deepEqual(await readdir(shm), []);
  t.deepEqual(await readdir(blobs), [id]);
});

test('fs: a failed put leaves no temp file in the directory', async (t) => {
  const { blobs } = await tempDirectory();
  const store = new FsBlobStore({ directory: blobs });
  await t.throwsAsync(store.put(newFileId(Date.now() / 1000), failingStream()));
  t.deepEqual(await readdir(blobs), []);
});

test('fs: a blob is one file named by its id, and nothing else remains after a put', async (t) => {
  const { blobs } = await tempDirectory();
  const store = new FsBlobStore({ directory: blobs });
  const id = newFileId(Date.now() / 1000);
  await store.put(id, bytesOf('%PDF-1.7'));
  t.deepEqual(await readdir(blobs), [id]);
});

test('fs: ids that are not file ids never become paths', async (t) => {
  const { root, blobs } = await tempDirectory();
  const store = new FsBlobStore({ directory: blobs });
  await mkdir(blobs);
  await writeFile(join(root, 'secret'), 'not a blob');
  for (const id of ['../secret', '../escaped', '/etc/passwd', 'file-../../../../../../../../secret', '']) {
    await t.throwsAsync(store.put(id, bytesOf('x')), { instanceOf: TypeError }, id);
    t.is(await store.get(id), undefined, id);
    t.false(await store.has(id), id);
    await store.delete(id);
  }
  t.deepEqual((await readdir(root)).sort(), ['blobs', 'secret']);
  t.deepEqual(await readdir(blobs), []);
});

test('fs: list takes the creation time from the file and skips what is not a blob', async (t) => {
  const { blobs } = await tempDirectory();
  const store = new FsBlobStore({ directory: blobs });
  const id = newFileId(Date.now() / 1000);
  await store.put(id, bytesOf('%PDF-1.7'));
  await utimes(join(blobs, id), 1_000_000_000, 1_000_000_000);
  await writeFile(join(blobs, 'README'), 'a stray file');
  await mkdir(join(blobs, newFileId(Date.now() / 1000))); // a directory named like a blob
  const listed = [];
  for await (const blob of store.list()) listed.push(blob);
  t.deepEqual(listed, [{ id, createdAt: 1_000_000_000 }]);
});

test('fs: list removes temp files a crashed writer left, once they are stale', async (t) => {
  const { blobs } = await tempDirectory();
  const store = new FsBlobStore({ directory: blobs, staleTempSeconds: 3600 });
  await mkdir(blobs);
  const stale = `.${newFileId(Date.now() / 1000)}.0123456789abcdef.tmp`;
  const fresh = `.${newFileId(Date.now() / 1000)}.fedcba9876543210.tmp`;
  await writeFile(join(blobs, stale), 'half a PDF');
  await writeFile(join(blobs, fresh), 'a PDF being written');
  const twoHoursAgo = Date.now() / 1000 - 7200;
  await utimes(join(blobs, stale), twoHoursAgo, twoHoursAgo);
  for await (const blob of store.list()) t.fail(`listed ${blob.id}`);
  t.deepEqual(await readdir(blobs), [fresh]);
});

test('fs: a directory that does not exist yet holds no blobs, and the first put creates it', async (t) => {
  const { blobs } = await tempDirectory();
  const store = new FsBlobStore({ directory: blobs });
  const id = newFileId(Date.now() / 1000);
  t.false(await store.has(id));
  for await (const blob of store.list()) t.fail(`listed ${blob.id}`);
  t.is(await store.put(id, bytesOf('%PDF-')), 5);
  const stream = await store.get(id);
  t.is(stream && (await readAll(stream)).toString(), '%PDF-');
});

test('fs: a bad configuration is refused at construction', (t) => {
  t.throws(() => new FsBlobStore({ directory: '' }), { instanceOf: TypeError, message: /koa-model-gateway/ });
  t.throws(() => new FsBlobStore({ directory: '/tmp/x', staleTempSeconds: 0 }), { instanceOf: TypeError });
  t.throws(() => new FsBlobStore({ directory: '/tmp/x', rename: 'mv' as never }), { instanceOf: TypeError });
});
