import test, { type ExecutionContext } from 'ava';
import { MemoryCreationLimiter } from '../../lib/quota/memory-creation-limiter.js';
import { filesApp, type FilesApp } from '../helpers/files-app.js';
import { multipart, pdfOf, uploadParts } from '../helpers/multipart.js';

// A fixed clock: the minute never rolls over in the middle of a test.
const MINUTE_START = Date.UTC(2030, 0, 1, 12, 0, 0);

async function setup(t: ExecutionContext, limits = {}): Promise<{ app: FilesApp; limiter: MemoryCreationLimiter }> {
  const limiter = new MemoryCreationLimiter({ createsPerMinute: 3, nowMs: () => MINUTE_START + 1000 });
  const app = await filesApp({ limiter, limits: { maxFileBytes: 100_000, ...limits } });
  t.teardown(() => app.close());
  return { app, limiter };
}

async function upload(app: FilesApp, pdf: Buffer): Promise<{ status: number; headers: Headers; body: { id?: string; error?: { code: string } } }> {
  const { body, contentType } = multipart(uploadParts(pdf));
  const res = await fetch(`${app.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': contentType }, body });
  return { status: res.status, headers: res.headers, body: (await res.json()) as { id?: string; error?: { code: string } } };
}

test('rejected uploads spend nothing; the creation rate refuses with 429 and retry-after', async (t) => {
  const { app, limiter } = await setup(t);
  for (const pdf of [Buffer.from('not a pdf'), pdfOf(100_001), Buffer.alloc(0)]) {
    t.not((await upload(app, pdf)).status, 200);
  }
  t.like(await limiter.usage('acct-a'), { createsThisMinute: 0, bytesToday: 0 });
  for (let i = 0; i < 3; i++) t.is((await upload(app, pdfOf(1000))).status, 200);
  const refused = await upload(app, pdfOf(1000));
  t.is(refused.status, 429);
  t.deepEqual(refused.body, { error: { message: 'Create rate exceeded', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' } });
  t.is(refused.headers.get('retry-after'), '59');
  t.is((await upload(app, Buffer.from('still validated first'))).status, 400, 'validation comes before the rate');
  t.deepEqual(await app.tempFiles(), []);
  t.is((await app.files.usage('acct-a', app.clock.seconds)).files, 3);
});

test('an upload refused by the kept limits gives its creation back', async (t) => {
  const { app, limiter } = await setup(t, { maxFiles: 1 });
  const first = await upload(app, pdfOf(1000));
  t.is(first.status, 200);
  for (let i = 0; i < 4; i++) t.is((await upload(app, pdfOf(1000))).body.error?.code, 'storage_quota_exceeded');
  t.like(await limiter.usage('acct-a'), { createsThisMinute: 1, bytesToday: 1000 });
  await fetch(`${app.url}/v1/files/${first.body.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${app.keys.a}` } });
  t.is((await upload(app, pdfOf(1000))).status, 200);
});

test('parallel uploads by one account create exactly the allowed number', async (t) => {
  const { app } = await setup(t);
  const statuses = (await Promise.all(Array.from({ length: 12 }, () => upload(app, pdfOf(1000))))).map((res) => res.status);
  t.is(statuses.filter((status) => status === 200).length, 3);
  t.is(statuses.filter((status) => status === 429).length, 9);
  t.is((await app.files.usage('acct-a', app.clock.seconds)).files, 3);
});
