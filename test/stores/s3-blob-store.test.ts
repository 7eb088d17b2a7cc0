import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import anyTest from 'ava';
import { StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { newFileId } from '../../lib/files/file-id.js';
import { S3BlobStore } from '../../lib/stores/s3/blob-store.js';
import { blobStoreContract, failingStream, readAll, streamOf } from '../../lib/testing/blob-store-contract.js';
import { withS3 } from '../helpers/s3-server.js';

const { test, s3 } = await withS3(anyTest);

/** A store on the test bucket under a prefix of its own, so that tests running at once never see each other's blobs. */
const freshStore = (prefix = s3.freshPrefix()) => new S3BlobStore({ client: s3.client(), bucket: s3.bucket, prefix });

blobStoreContract(test, 's3', async () => freshStore());

const MiB = 1024 * 1024;

test('s3: a blob larger than a part goes up in parts and reads back whole', async (t) => {
  const store = freshStore();
  const id = newFileId(Date.now() / 1000);
  const bytes = randomBytes(11 * MiB + 7); // three parts of 5 MiB, the last one short
  t.is(await store.put(id, streamOf(bytes)), bytes.length);
  const stream = await store.get(id);
  t.true(stream !== undefined && (await readAll(stream)).equals(bytes));
});

test('s3: a multipart upload whose stream fails is aborted, never completed', async (t) => {
  const client = s3.client();
  const sent: string[] = [];
  client.middlewareStack.add((next, context) => (args) => {
    sent.push(context.commandName ?? '');
    return next(args);
  }, { step: 'initialize' });
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

test('s3: blobs live under the prefix; list skips keys that are not blobs and sees no other prefix', async (t) => {
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

test('s3: list walks every page of a long listing, each page from where the last ended', async (t) => {
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
  t.deepEqual(listed.map((blob) => blob.id), ids);
  t.true(listed.every((blob) => blob.createdAt === 1_800_000_000));
});

test('s3: ping resolves while the bucket answers, and rejects for a bucket that is not there', async (t) => {
  await t.notThrowsAsync(freshStore().ping());
  const missing = new S3BlobStore({ client: s3.client(), bucket: 'no-such-bucket' });
  await t.throwsAsync(missing.ping());
});

test('s3: a store that does not answer is StoreUnavailableError (a 503), and a failed put is its error', async (t) => {
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
  await t.throwsAsync(async () => {
    for await (const blob of store.list()) t.fail(blob.id);
  }, { instanceOf: StoreUnavailableError });
  // The body's own failure wins over the store's: the client went away first.
  await t.throwsAsync(store.put(id, failingStream()), { message: 'client went away' });
});

test('s3: ids that are not file ids are refused or absent, never keys', async (t) => {
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

test('s3: a bad configuration is refused at construction', (t) => {
  const client = s3.client();
  t.throws(() => new S3BlobStore({ client: {} as never, bucket: 'b' }), { instanceOf: TypeError, message: /koa-model-gateway/ });
  t.throws(() => new S3BlobStore({ client, bucket: '' }), { instanceOf: TypeError });
  t.throws(() => new S3BlobStore({ client, bucket: 'b', prefix: 1 as never }), { instanceOf: TypeError });
  t.throws(() => new S3BlobStore({ client, bucket: 'b', partSize: MiB }), { instanceOf: TypeError, message: /5 MiB/ });
  t.throws(() => new S3BlobStore({ client, bucket: 'b', queueSize: 0 }), { instanceOf: TypeError });
});
