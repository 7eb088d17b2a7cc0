import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { PassThrough, Readable } from 'node:stream';
import type { StoreAssertions, StoreContractTest } from './store-contract-test.js';
import type { BlobStore } from '../files/blob-store.js';
import { newFileId } from '../files/file-id.js';

/** The stream's bytes, whole. */
export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A stream of `bytes` cut into uneven chunks, as a socket delivers them. */
export function streamOf(bytes: Buffer): Readable {
  const chunks: Buffer[] = [];
  for (let start = 0, size = 1; start < bytes.length; start += size, size = (size * 7) % 65_521) {
    chunks.push(bytes.subarray(start, start + size));
  }
  return Readable.from(chunks);
}

/** A stream that delivers some bytes, then fails as an upload cut off mid-way does. */
export function failingStream(): Readable {
  return Readable.from(
    (async function* () {
      yield randomBytes(100_000);
      yield randomBytes(100_000);
      throw new Error('client went away');
    })(),
  );
}

async function ids(store: BlobStore): Promise<string[]> {
  const found: string[] = [];
  for await (const blob of store.list()) found.push(blob.id);
  return found.sort();
}

/** The behaviour every BlobStore must have; run once per implementation. */
export function blobStoreContract(test: StoreContractTest, name: string, makeStore: () => Promise<BlobStore>): void {
  test(`${name}: put returns the byte count and get streams exactly those bytes, every time`, async (t) => {
    const store = await makeStore();
    const id = newFileId(Date.now() / 1000);
    const bytes = randomBytes(1024 * 1024 + 3);
    t.is(await store.put(id, streamOf(bytes)), bytes.length);
    t.true(await store.has(id));
    const first = await store.get(id);
    const second = await store.get(id);
    t.true(first !== undefined && second !== undefined);
    if (!first || !second) return;
    const [a, b] = await Promise.all([readAll(first), readAll(second)]);
    t.true(a.equals(bytes));
    t.true(b.equals(bytes));
  });

  test(`${name}: an empty stream is an empty blob`, async (t) => {
    const store = await makeStore();
    const id = newFileId(Date.now() / 1000);
    t.is(await store.put(id, Readable.from([])), 0);
    t.true(await store.has(id));
    const stream = await store.get(id);
    t.is(stream && (await readAll(stream)).length, 0);
  });

  test(`${name}: a missing blob is undefined, absent, and deleting it is no error`, async (t) => {
    const store = await makeStore();
    const id = newFileId(Date.now() / 1000);
    t.is(await store.get(id), undefined);
    t.false(await store.has(id));
    await t.notThrowsAsync(store.delete(id));
  });

  test(`${name}: delete removes the blob and nothing else`, async (t) => {
    const store = await makeStore();
    const [gone, kept] = [newFileId(Date.now() / 1000), newFileId(Date.now() / 1000)];
    await store.put(gone, streamOf(randomBytes(10)));
    await store.put(kept, streamOf(randomBytes(10)));
    await store.delete(gone);
    t.false(await store.has(gone));
    t.is(await store.get(gone), undefined);
    t.true(await store.has(kept));
    t.deepEqual(await ids(store), [kept]);
  });

  test(`${name}: a stream that fails leaves nothing behind, and put rejects with its error`, async (t) => {
    const store = await makeStore();
    const id = newFileId(Date.now() / 1000);
    await t.throwsAsync(store.put(id, failingStream()), { message: 'client went away' });
    t.false(await store.has(id));
    t.is(await store.get(id), undefined);
    t.deepEqual(await ids(store), []);
  });

  test(`${name}: a stream destroyed mid-way leaves nothing behind, and put rejects`, async (t) => {
    const store = await makeStore();
    const id = newFileId(Date.now() / 1000);
    const body = new PassThrough();
    const putting = store.put(id, body);
    body.write(randomBytes(50_000));
    await nextTurn();
    body.destroy();
    await t.throwsAsync(putting, { any: true });
    t.false(await store.has(id));
    t.deepEqual(await ids(store), []);
  });

  test(`${name}: a blob appears only once completely written`, async (t) => {
    const store = await makeStore();
    const id = newFileId(Date.now() / 1000);
    const [head, tail] = [randomBytes(70_000), randomBytes(70_000)];
    const body = new PassThrough();
    const putting = store.put(id, body);
    body.write(head);
    await nextTurn();
    t.false(await store.has(id));
    t.is(await store.get(id), undefined);
    t.deepEqual(await ids(store), []);
    body.end(tail);
    t.is(await putting, head.length + tail.length);
    const stream = await store.get(id);
    t.true(stream !== undefined && (await readAll(stream)).equals(Buffer.concat([head, tail])));
  });

  test(`${name}: parallel puts each keep their own bytes`, async (t) => {
    const store = await makeStore();
    const blobs = Array.from({ length: 20 }, (_, i) => ({ id: newFileId(Date.now() / 1000), bytes: randomBytes(1000 * i + 1) }));
    const counts = await Promise.all(blobs.map((blob) => store.put(blob.id, streamOf(blob.bytes))));
    t.deepEqual(
      counts,
      blobs.map((blob) => blob.bytes.length),
    );
    for (const blob of blobs) {
      const stream = await store.get(blob.id);
      t.true(stream !== undefined && (await readAll(stream)).equals(blob.bytes), blob.id);
    }
  });

  test(`${name}: list yields every blob once, with the second it was written`, async (t) => {
    const store = await makeStore();
    const before = Math.floor(Date.now() / 1000);
    const written = Array.from({ length: 5 }, () => newFileId(Date.now() / 1000));
    for (const id of written) await store.put(id, streamOf(randomBytes(10)));
    const after = Math.ceil(Date.now() / 1000);
    const listed = [];
    for await (const blob of store.list()) listed.push(blob);
    t.deepEqual(listed.map((blob) => blob.id).sort(), written.sort());
    for (const blob of listed) t.true(blob.createdAt >= before && blob.createdAt <= after, `${blob.createdAt}`);
  });
}

/** A finished file holding `bytes`, in a directory of its own removed after the test. */
async function sourceFile(t: StoreAssertions, bytes: Buffer): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'kmg-putfile-'));
  t.teardown(() => rm(directory, { recursive: true, force: true }));
  const path = join(directory, 'upload');
  await writeFile(path, bytes);
  return path;
}

/** A BlobStore that has the optional `putFile`. */
export type BlobStoreWithPutFile = BlobStore & Required<Pick<BlobStore, 'putFile'>>;

/**
 * The behaviour of `putFile`, taking over a finished file such as an upload's temp file; run once
 * per implementation that has it, beside `blobStoreContract`.
 */
export function putFileContract(test: StoreContractTest, name: string, makeStore: () => Promise<BlobStoreWithPutFile>): void {
  test(`${name}: putFile returns the byte count, and the blob keeps the bytes once the source is gone`, async (t) => {
    const store = await makeStore();
    const id = newFileId(Date.now() / 1000);
    const bytes = randomBytes(1024 * 1024 + 5);
    const path = await sourceFile(t, bytes);
    t.is(await store.putFile(id, path), bytes.length);
    await rm(path, { force: true });
    t.true(await store.has(id));
    const stream = await store.get(id);
    t.true(stream !== undefined && (await readAll(stream)).equals(bytes));
    t.deepEqual(await ids(store), [id]);
  });

  test(`${name}: putFile of an empty file is an empty blob`, async (t) => {
    const store = await makeStore();
    const id = newFileId(Date.now() / 1000);
    t.is(await store.putFile(id, await sourceFile(t, Buffer.alloc(0))), 0);
    const stream = await store.get(id);
    t.is(stream && (await readAll(stream)).length, 0);
  });

  test(`${name}: putFile of a missing file rejects and leaves nothing behind`, async (t) => {
    const store = await makeStore();
    const id = newFileId(Date.now() / 1000);
    const path = await sourceFile(t, randomBytes(10));
    await rm(path);
    await t.throwsAsync(store.putFile(id, path), { any: true });
    t.false(await store.has(id));
    t.is(await store.get(id), undefined);
    t.deepEqual(await ids(store), []);
  });

  test(`${name}: putFile refuses what is not a file id, leaving the source and the store as they were`, async (t) => {
    const store = await makeStore();
    const bytes = randomBytes(100);
    const path = await sourceFile(t, bytes);
    for (const id of ['../escaped', '/etc/passwd', 'file-../../escaped', '']) {
      await t.throwsAsync(store.putFile(id, path), { any: true }, id);
    }
    t.deepEqual(await ids(store), []);
    const left = await store.putFile(newFileId(Date.now() / 1000), path);
    t.is(left, bytes.length, 'the source was not consumed by a refused id');
  });

  test(`${name}: parallel putFiles each keep their own bytes`, async (t) => {
    const store = await makeStore();
    const blobs = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        const bytes = randomBytes(1000 * i + 1);
        return { id: newFileId(Date.now() / 1000), bytes, path: await sourceFile(t, bytes) };
      }),
    );
    const counts = await Promise.all(blobs.map((blob) => store.putFile(blob.id, blob.path)));
    t.deepEqual(
      counts,
      blobs.map((blob) => blob.bytes.length),
    );
    for (const blob of blobs) {
      const stream = await store.get(blob.id);
      t.true(stream !== undefined && (await readAll(stream)).equals(blob.bytes), blob.id);
    }
  });
}
