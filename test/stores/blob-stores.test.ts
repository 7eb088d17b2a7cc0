import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import test from 'ava';
import { StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { newFileId } from '../../lib/files/file-id.js';
import { FsBlobStore } from '../../lib/stores/fs/blob-store.js';
import { S3BlobStore } from '../../lib/stores/s3/blob-store.js';
import { blobStoreContract, failingStream, putFileContract, readAll, streamOf } from '../../lib/testing/blob-store-contract.js';
import { filesApp } from '../helpers/files-app.js';
import { pdfOf, uploadForm } from '../helpers/multipart.js';
import { stoppableS3Server, withS3, type StoppableS3Server } from '../helpers/s3-server.js';

// The blob stores: in memory, on a filesystem, and on S3 (s3rver in this process), whose bucket is
// also stopped (SIGSTOP, a server in a child process) to see every call end within its bound.

// Before any test is declared: AVA takes none declared after a top-level await.
const { test: s3Test, s3 } = await withS3(test);

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

// S3.

/** A store on the test bucket under a prefix of its own, so that tests running at once never see each other's blobs. */
const freshStore = (prefix = s3.freshPrefix()) => new S3BlobStore({ client: s3.client(), bucket: s3.bucket, prefix });

blobStoreContract(s3Test, 's3', async () => freshStore());

const MiB = 1024 * 1024;

s3Test('s3: a blob larger than a part goes up in parts and reads back whole', async (t) => {
  const store = freshStore();
  const id = newFileId(Date.now() / 1000);
  const bytes = randomBytes(11 * MiB + 7); // three parts of 5 MiB, the last one short
  t.is(await store.put(id, streamOf(bytes)), bytes.length);
  const stream = await store.get(id);
  t.true(stream !== undefined && (await readAll(stream)).equals(bytes));
});

s3Test('s3: a multipart upload whose stream fails is aborted, never completed', async (t) => {
  const client = s3.client();
  const sent: string[] = [];
  client.middlewareStack.add(
    (next, context) => (args) => {
      sent.push(context.commandName ?? '');
      return next(args);
    },
    { step: 'initialize' },
  );
  const store = new S3BlobStore({ client, bucket: s3.bucket, prefix: s3.freshPrefix() });
  const id = newFileId(Date.now() / 1000);
  const body = Readable.from(
    (async function* () {
      yield randomBytes(6 * MiB); // past the first part: the multipart upload has begun
      throw new Error('client went away');
    })(),
  );
  await t.throwsAsync(store.put(id, body), { message: 'client went away' });
  t.true(sent.includes('CreateMultipartUploadCommand'));
  t.true(sent.includes('AbortMultipartUploadCommand'), 'its parts are given up');
  t.false(sent.includes('CompleteMultipartUploadCommand'));
  t.false(await store.has(id));
});

s3Test('s3: blobs live under the prefix; list skips keys that are not blobs and sees no other prefix', async (t) => {
  const client = s3.client();
  const prefix = s3.freshPrefix();
  const store = new S3BlobStore({ client, bucket: s3.bucket, prefix });
  const neighbour = new S3BlobStore({ client, bucket: s3.bucket, prefix: `${prefix}nested/` });
  const id = newFileId(Date.now() / 1000);
  await store.put(id, streamOf(randomBytes(10)));
  await neighbour.put(newFileId(Date.now() / 1000), streamOf(randomBytes(10)));
  await client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: `${prefix}README`, Body: 'not a blob' }));
  const keys = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }));
  t.true(keys.Contents?.some((object) => object.Key === `${prefix}${id}`));
  const listed = [];
  for await (const blob of store.list()) listed.push(blob.id);
  t.deepEqual(listed, [id]);
});

s3Test('s3: list walks every page of a long listing, each page from where the last ended', async (t) => {
  // s3rver cannot page (its continuation tokens use DES, which OpenSSL 3 no longer has): a bucket
  // of 2,500 keys in memory answers ListObjectsV2 a page of 1,000 at a time, as S3 does.
  const prefix = 'files/';
  const ids = Array.from({ length: 2500 }, () => newFileId(Date.now() / 1000)).sort();
  const keys = [...ids.map((id) => prefix + id), `${prefix}README`].sort();
  const tokens: Array<string | undefined> = [];
  const client = {
    async send(command: unknown) {
      if (!(command instanceof ListObjectsV2Command)) throw new Error('only ListObjectsV2 here');
      const { Prefix, ContinuationToken } = command.input;
      t.is(Prefix, prefix);
      tokens.push(ContinuationToken);
      const start = ContinuationToken === undefined ? 0 : Number(ContinuationToken);
      const end = Math.min(start + 1000, keys.length);
      return {
        Contents: keys.slice(start, end).map((Key) => ({ Key, LastModified: new Date(1_800_000_000_000) })),
        IsTruncated: end < keys.length,
        ...(end < keys.length ? { NextContinuationToken: String(end) } : {}),
      };
    },
  };
  const store = new S3BlobStore({ client: client as never, bucket: 'b', prefix });
  const listed = [];
  for await (const blob of store.list()) listed.push(blob);
  t.deepEqual(tokens, [undefined, '1000', '2000']);
  t.deepEqual(
    listed.map((blob) => blob.id),
    ids,
  );
  t.true(listed.every((blob) => blob.createdAt === 1_800_000_000));
});

s3Test('s3: ping resolves while the bucket answers, and rejects for a bucket that is not there', async (t) => {
  await t.notThrowsAsync(freshStore().ping());
  const missing = new S3BlobStore({ client: s3.client(), bucket: 'no-such-bucket' });
  await t.throwsAsync(missing.ping());
});

s3Test('s3: a store that does not answer is StoreUnavailableError (a 503), and a failed put is its error', async (t) => {
  const closed = createServer();
  closed.listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const { port } = closed.address() as AddressInfo;
  await new Promise((resolve) => closed.close(resolve));
  const client = s3.client({ endpoint: `http://127.0.0.1:${port}`, maxAttempts: 1 });
  const store = new S3BlobStore({ client, bucket: s3.bucket });
  const id = newFileId(Date.now() / 1000);
  for (const call of [() => store.get(id), () => store.has(id), () => store.delete(id), () => store.ping(), () => store.put(id, streamOf(randomBytes(10)))]) {
    await t.throwsAsync(call(), { instanceOf: StoreUnavailableError });
  }
  await t.throwsAsync(
    async () => {
      for await (const blob of store.list()) t.fail(blob.id);
    },
    { instanceOf: StoreUnavailableError },
  );
  // The body's own failure wins over the store's: the client went away first.
  await t.throwsAsync(store.put(id, failingStream()), { message: 'client went away' });
});

s3Test('s3: ids that are not file ids are refused or absent, never keys', async (t) => {
  const client = s3.client();
  const prefix = s3.freshPrefix();
  const store = new S3BlobStore({ client, bucket: s3.bucket, prefix });
  for (const id of ['../escaped', '', 'file-short', `${newFileId(Date.now() / 1000)}/x`]) {
    await t.throwsAsync(store.put(id, streamOf(Buffer.from('x'))), { instanceOf: TypeError }, id);
    t.is(await store.get(id), undefined, id);
    t.false(await store.has(id), id);
    await store.delete(id);
  }
  const keys = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }));
  t.deepEqual(keys.Contents ?? [], []);
});

s3Test('s3: a bad configuration is refused at construction', (t) => {
  const client = s3.client();
  t.throws(() => new S3BlobStore({ client: {} as never, bucket: 'b' }), { instanceOf: TypeError, message: /koa-model-gateway/ });
  t.throws(() => new S3BlobStore({ client, bucket: '' }), { instanceOf: TypeError });
  t.throws(() => new S3BlobStore({ client, bucket: 'b', prefix: 1 as never }), { instanceOf: TypeError });
  t.throws(() => new S3BlobStore({ client, bucket: 'b', partSize: MiB }), { instanceOf: TypeError, message: /5 MiB/ });
  t.throws(() => new S3BlobStore({ client, bucket: 'b', queueSize: 0 }), { instanceOf: TypeError });
});

// S3 on a stopped bucket (its server stopped with SIGSTOP): the kernel still accepts connections
// and bytes, nothing answers. Every call to it ends within its bound. These tests are serial: AVA
// runs them first, one at a time, before every other test of this file.

/** A short bound, so that the stall costs little, and far above a request's time on a busy machine. */
const BOUND_MS = 2000;
/** What a call may take beyond its bound on a shared, busy machine; the stall lasts until the test ends it. */
const SLACK_MS = 4 * BOUND_MS;

let stoppableS3: StoppableS3Server;
test.before(async () => {
  stoppableS3 = await stoppableS3Server();
});
test.after.always(() => stoppableS3?.stop());

async function timed<T>(call: () => Promise<T>): Promise<{ value: T | undefined; error: unknown; ms: number }> {
  const started = performance.now();
  try {
    return { value: await call(), error: undefined, ms: performance.now() - started };
  } catch (error) {
    return { value: undefined, error, ms: performance.now() - started };
  }
}

test.serial('S3BlobStore on a stopped bucket: an upload, a download and every other call fail as unavailable within timeoutMs, and all recovers', async (t) => {
  t.timeout(10 * BOUND_MS, 'calls held while the bucket is stopped');
  const blobs = new S3BlobStore({ client: stoppableS3.client(), bucket: stoppableS3.bucket, prefix: stoppableS3.freshPrefix(), timeoutMs: BOUND_MS });
  const id = newFileId(Date.now() / 1000);
  const bytes = randomBytes(1000);
  await blobs.put(id, Readable.from([bytes]));

  stoppableS3.pause();
  let other = newFileId(Date.now() / 1000);
  const calls = await Promise.all([
    timed(() => blobs.put(other, Readable.from([bytes]))),
    timed(() => blobs.get(id)),
    timed(() => blobs.has(id)),
    // Not `id`: the bucket, resumed, still runs the requests it was sent.
    timed(() => blobs.delete(newFileId(Date.now() / 1000))),
    timed(() => blobs.ping()),
    timed(async () => {
      for await (const blob of blobs.list()) void blob;
    }),
  ]);
  stoppableS3.resume();
  for (const call of calls) {
    t.true(call.error instanceof StoreUnavailableError, String(call.error));
    t.true(call.ms < BOUND_MS + SLACK_MS, `answered after ${Math.round(call.ms)} ms`);
  }

  const body = await blobs.get(id);
  t.truthy(body);
  const chunks: Buffer[] = [];
  for await (const chunk of body as Readable) chunks.push(chunk as Buffer);
  t.true(Buffer.concat(chunks).equals(bytes));
  other = newFileId(Date.now() / 1000);
  t.is(await blobs.put(other, Readable.from([bytes])), bytes.length);
});

test.serial("a download whose bucket stops mid-body ends with an error after the client's socketTimeout of silence, not never", async (t) => {
  t.timeout(20 * BOUND_MS, 'a download body held while the bucket is stopped');
  const SILENCE_MS = 1000;
  // As README recommends: the silence of a body is the client's to bound.
  const client = stoppableS3.client({ requestHandler: { connectionTimeout: BOUND_MS, socketTimeout: SILENCE_MS } });
  const prefix = stoppableS3.freshPrefix();
  const blobs = new S3BlobStore({ client, bucket: stoppableS3.bucket, prefix });
  const id = newFileId(Date.now() / 1000);
  // Far more than the loopback socket buffers hold: the bucket is still sending when it stops. The
  // upload goes through a client of its own, without the short silence bound: a busy bucket may
  // pause longer than that between its ten parts.
  const uploader = new S3BlobStore({ client: stoppableS3.client(), bucket: stoppableS3.bucket, prefix, timeoutMs: 60_000 });
  await uploader.put(id, Readable.from([randomBytes(16 * 1024 * 1024)]));
  const body = (await blobs.get(id)) as Readable;
  const reading = body[Symbol.asyncIterator]();
  await reading.next();
  stoppableS3.pause();
  t.teardown(() => stoppableS3.resume());
  const started = performance.now();
  const ended = await (async () => {
    for (;;) if ((await reading.next()).done) return 'complete';
  })().catch((err: unknown) => err);
  stoppableS3.resume();
  t.not(ended, 'complete');
  t.true(performance.now() - started < SILENCE_MS + SLACK_MS + BOUND_MS, `ended after ${Math.round(performance.now() - started)} ms`);
});

test.serial('the files API on a stopped bucket: uploads and downloads answer 503 within the bound, then 200 once it is back', async (t) => {
  t.timeout(10 * BOUND_MS, 'requests held while the bucket is stopped');
  const blobs = new S3BlobStore({ client: stoppableS3.client(), bucket: stoppableS3.bucket, prefix: stoppableS3.freshPrefix(), timeoutMs: BOUND_MS });
  const app = await filesApp({ blobs });
  t.teardown(() => app.close());
  const auth = { authorization: `Bearer ${app.keys.a}` };
  const upload = () => fetch(`${app.url}/v1/files`, { method: 'POST', headers: auth, body: uploadForm(pdfOf(1000)) });
  const created = await upload();
  t.is(created.status, 200);
  const { id } = (await created.json()) as { id: string };
  const download = () => fetch(`${app.url}/v1/files/${id}/content`, { headers: auth });

  stoppableS3.pause();
  const answers = await Promise.all([timed(upload), timed(download)]);
  stoppableS3.resume();
  for (const { value, ms } of answers) {
    t.is(value?.status, 503);
    t.like(await value?.json(), { error: { code: 'service_unavailable' } });
    t.true(ms < BOUND_MS + SLACK_MS, `answered after ${Math.round(ms)} ms`);
  }

  t.is((await download()).status, 200);
  t.is((await upload()).status, 200);
});
