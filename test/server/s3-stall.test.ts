import test from 'ava';
import { pdfOf, uploadForm } from '../helpers/multipart.js';
import { stoppableS3Server, type StoppableS3Server } from '../helpers/s3-server.js';
import { createKey, startServer, tempDataDir } from '../helpers/server-process.js';

// The reference server in front of a bucket whose server is stopped (SIGSTOP): a file of its own,
// so that its ten seconds of stall run beside the stopped-bucket tests of
// test/stores/blob-stores.test.ts, not after them.

/** What a call may take beyond its bound on a shared, busy machine. */
const SLACK_MS = 4000;

let s3: StoppableS3Server;
test.before(async () => {
  s3 = await stoppableS3Server();
});
test.after.always(() => s3?.stop());

async function timed<T>(call: () => Promise<T>): Promise<{ value: T | undefined; ms: number }> {
  const started = performance.now();
  try {
    return { value: await call(), ms: performance.now() - started };
  } catch {
    return { value: undefined, ms: performance.now() - started };
  }
}

test.serial('the reference server on a stopped bucket: an upload and a download answer 503 within the default bound (10 s)', async (t) => {
  const DEFAULT_BOUND_MS = 10_000;
  t.timeout(DEFAULT_BOUND_MS + 4 * SLACK_MS, 'requests held while the bucket is stopped');
  const data = await tempDataDir();
  t.teardown(data.remove);
  const env = { ...s3.env(s3.freshPrefix()), DATA_DIR: data.dir };
  const { key } = await createKey(env, ['--account', 'stalled']);
  const server = await startServer(env);
  t.teardown(() => server.stop());
  const auth = { authorization: `Bearer ${key}` };
  const upload = () => fetch(`${server.url}/v1/files`, { method: 'POST', headers: auth, body: uploadForm(pdfOf(1000)) });
  const created = await upload();
  t.is(created.status, 200);
  const { id } = (await created.json()) as { id: string };
  const download = () => fetch(`${server.url}/v1/files/${id}/content`, { headers: auth });

  s3.pause();
  const answers = await Promise.all([timed(upload), timed(download)]);
  s3.resume();
  for (const { value, ms } of answers) {
    t.is(value?.status, 503);
    t.true(ms < DEFAULT_BOUND_MS + SLACK_MS, `answered after ${Math.round(ms)} ms`);
  }
  t.is((await download()).status, 200);
});
