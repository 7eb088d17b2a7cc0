import test, { type ExecutionContext } from 'ava';
import { newFileId } from '../../lib/files/file-id.js';
import type { FileRecord } from '../../lib/files/file-store.js';
import { DEFAULT_FILE_LIMITS } from '../../lib/files/file-limits.js';
import { MemoryCreationLimiter } from '../../lib/stores/memory/creation-limiter.js';
import { loadConfig } from '../../reference-server/config.js';
import { abortUploadMidway, filesApp, type FilesApp, type FilesAppOptions } from '../helpers/files-app.js';
import { multipart, pdfOf, uploadParts, type Part } from '../helpers/multipart.js';
import { SPEC_LIMITS } from '../helpers/spec-limits.js';

// Rules of api.md sections 2, 3, 4 and 8 and decisions.md "Limits" and "Files" that no other test
// pins down: the spec's own default numbers, a file without expiry, list positions, limits per
// account rather than per key, and what an aborted upload spends.

async function files(t: ExecutionContext, options: FilesAppOptions = {}): Promise<FilesApp> {
  const app = await filesApp(options);
  t.teardown(() => app.close());
  return app;
}

async function upload(app: FilesApp, key: string, pdf: Buffer, extra: Part[] = []): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const { body, contentType } = multipart(uploadParts(pdf, 'report.pdf', extra));
  const res = await fetch(`${app.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': contentType }, body });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

const get = async (app: FilesApp, key: string, path: string) => {
  const res = await fetch(`${app.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

const ROOMY = { maxFiles: Number.MAX_SAFE_INTEGER, maxBytes: Number.MAX_SAFE_INTEGER };

/** Puts `count` files of `account` in the store directly, as earlier uploads would have. */
async function seed(app: FilesApp, account: string, count: number, bytes = 1): Promise<FileRecord[]> {
  const records: FileRecord[] = [];
  for (let i = 0; i < count; i++) {
    const createdAt = app.clock.seconds - count + i;
    const record: FileRecord = { id: newFileId(createdAt), account, filename: 'old.pdf', bytes, createdAt, expiresAt: null };
    if (!(await app.files.create(record, ROOMY, app.clock.seconds))) throw new Error('seed refused');
    records.push(record);
  }
  return records;
}

const STORAGE_QUOTA = { error: { message: 'Storage quota exceeded', type: 'rate_limit_error', param: null, code: 'storage_quota_exceeded' } };

test('api.md section 8: the spec numbers are the defaults of lib and of the reference server', (t) => {
  const { maxFileBytes, maxFiles, maxStoredBytes } = SPEC_LIMITS;
  t.deepEqual({ ...DEFAULT_FILE_LIMITS }, { maxFileBytes, maxFiles, maxStoredBytes });
  t.deepEqual(loadConfig({}).gateway.limits, SPEC_LIMITS);
});

test('api.md section 8: by default an account keeps 1,000 files; the 1,001st is 429 storage_quota_exceeded', async (t) => {
  const app = await files(t);
  await seed(app, 'acct-a', 999);
  t.is((await upload(app, app.keys.a, pdfOf(100))).status, 200, 'the 1,000th');
  const refused = await upload(app, app.keys.a, pdfOf(100));
  t.is(refused.status, 429, 'the 1,001st');
  t.deepEqual(refused.body, STORAGE_QUOTA);
  t.is(refused.headers.get('x-should-retry'), 'false');
});

test('api.md section 8: by default an account keeps 100,000,000 bytes, exactly', async (t) => {
  const app = await files(t);
  await seed(app, 'acct-a', 1, 100_000_000 - 1000);
  t.is((await upload(app, app.keys.a, pdfOf(1000))).status, 200, 'exactly the remaining bytes fit');
  const refused = await upload(app, app.keys.a, pdfOf(10));
  t.is(refused.status, 429);
  t.deepEqual(refused.body, STORAGE_QUOTA);
});

test('api.md section 4: without a limit a page holds 10,000 files, and has_more says the rest is there', async (t) => {
  const app = await files(t);
  const seeded = await seed(app, 'acct-a', 10_001);
  const ids = seeded.map((file) => file.id).sort();
  const desc = await get(app, app.keys.a, '/v1/files');
  t.is(desc.status, 200);
  const data = desc.body.data as Array<{ id: string }>;
  t.is(data.length, 10_000);
  t.true(desc.body.has_more);
  t.is(desc.body.first_id, ids.at(-1));
  t.is(desc.body.last_id, ids[1]);
  const rest = await get(app, app.keys.a, `/v1/files?after=${ids[1]}`);
  t.deepEqual(rest.body, { object: 'list', data: [{ id: ids[0], object: 'file', bytes: 1, created_at: seeded[0]?.createdAt, filename: 'old.pdf', purpose: 'user_data', status: 'processed' }], first_id: ids[0], last_id: ids[0], has_more: false });
});

test('api.md section 3: a file uploaded without an expiry stays until it is deleted, and counts all along', async (t) => {
  const app = await files(t);
  const { body: file } = await upload(app, app.keys.a, pdfOf(500));
  t.false('expires_at' in file);
  app.clock.seconds += 10 * 365 * 86_400;
  t.deepEqual((await get(app, app.keys.a, `/v1/files/${file.id}`)).body, file, 'ten years on');
  t.deepEqual(((await get(app, app.keys.a, '/v1/files')).body.data as unknown[]), [file]);
  t.deepEqual(await app.files.usage('acct-a', app.clock.seconds), { files: 1, bytes: 500 });
  t.is((await fetch(`${app.url}/v1/files/${file.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${app.keys.a}` } })).status, 200);
  t.is((await get(app, app.keys.a, `/v1/files/${file.id}`)).status, 404);
});

test('decisions.md Files: after keeps working when that file has expired, and a foreign id is only a position', async (t) => {
  const app = await files(t);
  const expiring = [
    { name: 'expires_after[anchor]', value: 'created_at' },
    { name: 'expires_after[seconds]', value: '3600' },
  ];
  const first = (await upload(app, app.keys.a, pdfOf(100))).body.id as string;
  app.clock.seconds += 1;
  const middle = (await upload(app, app.keys.a, pdfOf(100), expiring)).body.id as string;
  app.clock.seconds += 1;
  const foreign = (await upload(app, app.keys.b, pdfOf(100))).body.id as string;
  app.clock.seconds += 1;
  const last = (await upload(app, app.keys.a, pdfOf(100))).body.id as string;
  app.clock.seconds += 3600;
  t.is((await get(app, app.keys.a, `/v1/files/${middle}`)).status, 404, 'the middle file has expired');

  const page = async (query: string) => ((await get(app, app.keys.a, `/v1/files?${query}`)).body.data as Array<{ id: string }>).map((file) => file.id);
  t.deepEqual(await page(`order=asc&after=${middle}`), [last]);
  t.deepEqual(await page(`order=desc&after=${middle}`), [first]);
  // The other account's file sits between first and last: as a position it says nothing more.
  const foreignPage = await get(app, app.keys.a, `/v1/files?order=asc&after=${foreign}`);
  t.is(foreignPage.status, 200);
  t.deepEqual((foreignPage.body.data as Array<{ id: string }>).map((file) => file.id), [last]);
  t.deepEqual(await page(`order=desc&after=${foreign}`), [first]);
});

test("decisions.md Keys: files and quotas belong to the account: every key of it shares them, another account's do not", async (t) => {
  const NOON = Date.UTC(2030, 0, 15, 12, 0, 0);
  const limiter = new MemoryCreationLimiter({ createsPerMinute: 2, nowMs: () => NOON });
  const app = await files(t, { creationLimiter: limiter, limits: { maxFiles: 1 } });
  const { body: file } = await upload(app, app.keys.a, pdfOf(100));
  t.deepEqual((await upload(app, app.keys.a2, pdfOf(100))).body, STORAGE_QUOTA, "the stock is the account's");
  t.deepEqual(((await get(app, app.keys.a2, '/v1/files')).body.data as unknown[]), [file]);
  t.is((await fetch(`${app.url}/v1/files/${file.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${app.keys.a2}` } })).status, 200);
  t.is((await upload(app, app.keys.a2, pdfOf(100))).status, 200, 'the second creation of the minute');
  t.like((await upload(app, app.keys.a, pdfOf(100))).body, { error: { code: 'rate_limit_exceeded' } }, "the rate is the account's");
  t.is((await upload(app, app.keys.b, pdfOf(100))).status, 200, 'another account has its own');
});

test('decisions.md Limits: the bytes created per day are the PDF bytes, not the multipart envelope', async (t) => {
  const limiter = new MemoryCreationLimiter({ bytesPerDay: 3000, nowMs: () => Date.UTC(2030, 0, 15, 23, 0, 0) });
  const app = await files(t, { creationLimiter: limiter });
  for (let i = 0; i < 3; i++) t.is((await upload(app, app.keys.a, pdfOf(1000))).status, 200, `upload ${i + 1} of 1,000 bytes`);
  const refused = await upload(app, app.keys.a, pdfOf(10));
  t.is(refused.status, 429);
  t.deepEqual(refused.body, { error: { message: 'Ingestion quota exceeded', type: 'rate_limit_error', param: null, code: 'ingestion_quota_exceeded' } });
  t.is(refused.headers.get('retry-after'), '3600', 'seconds to the next UTC midnight');
  t.like(await limiter.usage('acct-a'), { bytesToday: 3000, createsToday: 3 });
});

test('decisions.md Limits: an upload the client aborts spends nothing from any limit', async (t) => {
  const limiter = new MemoryCreationLimiter({ nowMs: () => Date.UTC(2030, 0, 15, 12, 0, 0) });
  const app = await files(t, { creationLimiter: limiter });
  await abortUploadMidway(app, pdfOf(1_000_000));
  t.deepEqual(await limiter.usage('acct-a'), { createsThisMinute: 0, createsToday: 0, bytesToday: 0 });
  t.deepEqual(await app.files.usage('acct-a', app.clock.seconds), { files: 0, bytes: 0 });
  t.is((await upload(app, app.keys.a, pdfOf(100))).status, 200);
});

test('decisions.md Files: files uploaded one after another within one second are listed in that order', async (t) => {
  const app = await files(t);
  const second = app.clock.seconds;
  const uploaded: unknown[] = [];
  for (const [i, tenths] of [0, 1, 1, 1, 5, 9].entries()) {
    app.clock.seconds = second + tenths / 10; // three in one millisecond, all in one second
    const { status, body } = await upload(app, app.keys.a, pdfOf(100 + i));
    t.is(status, 200);
    t.is(body.created_at, second);
    uploaded.push(body.id);
  }
  const asc = await get(app, app.keys.a, '/v1/files?order=asc');
  t.deepEqual((asc.body.data as Array<{ id: string }>).map((file) => file.id), uploaded);
  const desc = await get(app, app.keys.a, '/v1/files');
  t.deepEqual((desc.body.data as Array<{ id: string }>).map((file) => file.id), uploaded.toReversed());
});
