import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import test from 'ava';
import { newFileId } from '../../lib/files/file-id.js';
import { FsBlobStore } from '../../lib/stores/fs/blob-store.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { blobStoreContract, failingStream, readAll } from '../contracts/blob-store.js';

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

const bytesOf = (text: string) => Readable.from([Buffer.from(text)]);

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
});
