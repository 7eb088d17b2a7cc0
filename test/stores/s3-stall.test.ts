import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import test from 'ava';
import { StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { newFileId } from '../../lib/files/file-id.js';
import { S3BlobStore } from '../../lib/stores/s3/blob-store.js';
import { filesApp } from '../helpers/files-app.js';
import { pdfOf, uploadForm } from '../helpers/multipart.js';
import { stoppableS3Server, type StoppableS3Server } from '../helpers/s3-server.js';

// A bucket whose server is stopped (SIGSTOP): the kernel still accepts connections and bytes,
// nothing answers. Every call to it ends within its bound.

/** A short bound, so that the stall costs little, and far above a request's time on a busy machine. */
const BOUND_MS = 2000;
/** What a call may take beyond its bound on a shared, busy machine; the stall lasts until the test ends it. */
const SLACK_MS = 4 * BOUND_MS;

let s3: StoppableS3Server;
test.before(async () => {
  s3 = await stoppableS3Server();
});
test.after.always(() => s3?.stop());

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
  const blobs = new S3BlobStore({ client: s3.client(), bucket: s3.bucket, prefix: s3.freshPrefix(), timeoutMs: BOUND_MS });
  const id = newFileId(Date.now() / 1000);
  const bytes = randomBytes(1000);
  await blobs.put(id, Readable.from([bytes]));

  s3.pause();
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
  s3.resume();
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

test.serial('a download whose bucket stops mid-body ends with an error after the client\'s socketTimeout of silence, not never', async (t) => {
  t.timeout(20 * BOUND_MS, 'a download body held while the bucket is stopped');
  const SILENCE_MS = 1000;
  // As README recommends: the silence of a body is the client's to bound.
  const client = s3.client({ requestHandler: { connectionTimeout: BOUND_MS, socketTimeout: SILENCE_MS } });
  const prefix = s3.freshPrefix();
  const blobs = new S3BlobStore({ client, bucket: s3.bucket, prefix });
  const id = newFileId(Date.now() / 1000);
  // Far more than the loopback socket buffers hold: the bucket is still sending when it stops. The
  // upload goes through a client of its own, without the short silence bound: a busy bucket may
  // pause longer than that between its ten parts.
  const uploader = new S3BlobStore({ client: s3.client(), bucket: s3.bucket, prefix, timeoutMs: 60_000 });
  await uploader.put(id, Readable.from([randomBytes(16 * 1024 * 1024)]));
  const body = (await blobs.get(id)) as Readable;
  const reading = body[Symbol.asyncIterator]();
  await reading.next();
  s3.pause();
  t.teardown(() => s3.resume());
  const started = performance.now();
  const ended = await (async () => {
    for (;;) if ((await reading.next()).done) return 'complete';
  })().catch((err: unknown) => err);
  s3.resume();
  t.not(ended, 'complete');
  t.true(performance.now() - started < SILENCE_MS + SLACK_MS + BOUND_MS, `ended after ${Math.round(performance.now() - started)} ms`);
});

test.serial('the files API on a stopped bucket: uploads and downloads answer 503 within the bound, then 200 once it is back', async (t) => {
  t.timeout(10 * BOUND_MS, 'requests held while the bucket is stopped');
  const blobs = new S3BlobStore({ client: s3.client(), bucket: s3.bucket, prefix: s3.freshPrefix(), timeoutMs: BOUND_MS });
  const app = await filesApp({ blobs });
  t.teardown(() => app.close());
  const auth = { authorization: `Bearer ${app.keys.a}` };
  const upload = () => fetch(`${app.url}/v1/files`, { method: 'POST', headers: auth, body: uploadForm(pdfOf(1000)) });
  const created = await upload();
  t.is(created.status, 200);
  const { id } = (await created.json()) as { id: string };
  const download = () => fetch(`${app.url}/v1/files/${id}/content`, { headers: auth });

  s3.pause();
  const answers = await Promise.all([timed(upload), timed(download)]);
  s3.resume();
  for (const { value, ms } of answers) {
    t.is(value?.status, 503);
    t.like(await value?.json(), { error: { code: 'service_unavailable' } });
    t.true(ms < BOUND_MS + SLACK_MS, `answered after ${Math.round(ms)} ms`);
  }

  t.is((await download()).status, 200);
  t.is((await upload()).status, 200);
});
