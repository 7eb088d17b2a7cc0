import Anthropic, { toFile } from '@anthropic-ai/sdk';
import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import OpenAI, { APIError, toFile as openAIFile } from 'openai';
import { MemoryCreationLimiter } from '../../lib/stores/memory/creation-limiter.js';
import { filesApp, type FilesApp, type FilesAppOptions } from '../helpers/files-app.js';
import { pdfOf } from '../helpers/multipart.js';
import { checkedFetch } from '../helpers/openapi.js';

// The files API through the SDKs, as their users write them, against filesRouter() behind
// gatewayErrors(). @anthropic-ai/sdk's `client.beta.files`: Anthropic's shapes and Shape B errors
// for its requests, the same files as the openai SDK's, every answer checked against
// docs/openapi.json on the way. Then the openai SDK's `files` alone.

// The hooks apply to every test of the file: the openai SDK's tests check no answer, so their
// list of problems stays empty.
const test = anyTest as TestFn<{ problems: string[] }>;
test.beforeEach((t) => {
  t.context.problems = [];
});
test.afterEach((t) => t.deepEqual(t.context.problems, [], 'every answer agrees with docs/openapi.json'));

const LIMIT = 100_000;
const REQUEST_ID = /^req_[A-Za-z0-9]{32}$/;
/** A moment inside one clock minute and UTC day: the creation limits never roll over mid-test. */
const FIXED_MS = Date.UTC(2026, 5, 1, 12, 0, 30);

interface Clients {
  app: FilesApp;
  anthropic: (key?: string) => Anthropic;
  openai: (key?: string) => OpenAI;
}

async function setup(t: ExecutionContext<{ problems: string[] }>, options: FilesAppOptions = {}): Promise<Clients> {
  const app = await filesApp({ limits: { maxFileBytes: LIMIT }, ...options });
  t.teardown(() => app.close());
  const fetch = checkedFetch(t.context.problems);
  return {
    app,
    // As users write them: Anthropic's SDK takes the base URL without /v1, OpenAI's with it.
    anthropic: (key = app.keys.a) => new Anthropic({ apiKey: key, baseURL: app.url, maxRetries: 0, fetch }),
    openai: (key = app.keys.a) => new OpenAI({ apiKey: key, baseURL: `${app.url}/v1`, maxRetries: 0, fetch }),
  };
}

const pdfFile = (bytes: number, name = 'report.pdf', fill?: number) => toFile(pdfOf(bytes, fill), name, { type: 'application/pdf' });

// biome-ignore lint/suspicious/noExplicitAny: any constructor of an APIError subclass
type ErrorClass = new (...args: any[]) => InstanceType<typeof Anthropic.APIError>;

const iso = (seconds: number) => new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');

/** The SDK's error, of exactly `errorClass`, with Shape B's body and its request id in both places. */
async function shapeBError(
  t: ExecutionContext,
  call: Promise<unknown>,
  errorClass: ErrorClass,
  type: string,
  message: string,
): Promise<InstanceType<typeof Anthropic.APIError> | undefined> {
  const err = await t.throwsAsync<InstanceType<typeof Anthropic.APIError>>(call, { instanceOf: errorClass });
  t.is(err?.constructor, errorClass, message);
  t.regex(err?.requestID ?? '', REQUEST_ID);
  t.deepEqual(err?.error, { type: 'error', error: { type, message }, request_id: err?.requestID });
  return err;
}

test('beta.files: upload, retrieveMetadata, download the same bytes and delete, in Anthropic shape', async (t) => {
  const { app, anthropic } = await setup(t);
  const client = anthropic();
  const pdf = pdfOf(5000, 0x42);
  const created = await client.beta.files.upload({ file: await toFile(pdf, 'contract.pdf', { type: 'application/pdf' }) });
  t.deepEqual(created, {
    id: created.id,
    type: 'file',
    filename: 'contract.pdf',
    mime_type: 'application/pdf',
    size_bytes: 5000,
    created_at: iso(app.clock.seconds),
    downloadable: true,
  });
  t.regex(created.id, /^file-[A-Za-z0-9_-]{32}$/);

  t.deepEqual(await client.beta.files.retrieveMetadata(created.id), created);
  const download = await client.beta.files.download(created.id);
  t.is(download.headers.get('content-type'), 'application/pdf');
  t.regex(download.headers.get('request-id') ?? '', REQUEST_ID);
  t.true(Buffer.from(await download.arrayBuffer()).equals(pdf));

  t.deepEqual(await client.beta.files.delete(created.id), { id: created.id, type: 'file_deleted' });
  await shapeBError(t, client.beta.files.retrieveMetadata(created.id), Anthropic.NotFoundError, 'not_found_error', 'File not found');
  await shapeBError(t, client.beta.files.delete(created.id), Anthropic.NotFoundError, 'not_found_error', 'File not found');
});

test('beta.files: expires_in_seconds sets expires_at within the same bounds as expires_after', async (t) => {
  const { app, anthropic } = await setup(t);
  const client = anthropic();
  const created = await client.beta.files.upload({ file: await pdfFile(300), expires_in_seconds: 7200 });
  t.is(created.created_at, iso(app.clock.seconds));
  t.is(created.expires_at, iso(app.clock.seconds + 7200));
  t.like(await client.beta.files.retrieveMetadata(created.id), { expires_at: created.expires_at });
  app.clock.seconds += 7200;
  await shapeBError(t, client.beta.files.retrieveMetadata(created.id), Anthropic.NotFoundError, 'not_found_error', 'File not found');

  const range = "'expires_in_seconds' must be an integer from 3600 to 2592000";
  for (const seconds of [3599, 2_592_001]) {
    await shapeBError(
      t,
      client.beta.files.upload({ file: await pdfFile(300), expires_in_seconds: seconds }),
      Anthropic.BadRequestError,
      'invalid_request_error',
      range,
    );
  }
  t.is((await app.files.usage('acct-a', app.clock.seconds)).files, 0);
});

test('beta.files.list pages newest first through more than one page; after_id, before_id, ids and beta=true as Anthropic pages', async (t) => {
  const { app, anthropic } = await setup(t);
  const client = anthropic();
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    ids.push((await client.beta.files.upload({ file: await pdfFile(100 + i, `f${i}.pdf`) })).id);
    if (i % 2 === 0) app.clock.seconds += 1;
  }
  const newestFirst = [...ids].reverse();
  const seen: string[] = [];
  for await (const file of client.beta.files.list({ limit: 2 })) seen.push(file.id);
  t.deepEqual(seen, newestFirst);

  const first = await client.beta.files.list({ limit: 2 });
  t.deepEqual(
    first.data.map((file) => file.id),
    newestFirst.slice(0, 2),
  );
  t.true(first.hasNextPage());
  t.like(first.data[0], { type: 'file', filename: 'f4.pdf', size_bytes: 104 });

  // The paging of Anthropic's API reference (and of earlier SDKs): after_id and before_id.
  const page = async (query: string) => {
    const response = await checkedFetch(t.context.problems)(`${app.url}/v1/files?beta=true&${query}`, {
      headers: { 'x-api-key': app.keys.a, 'anthropic-version': '2023-06-01' },
    });
    t.is(response.status, 200, query);
    return (await response.json()) as {
      data: Array<{ id: string }>;
      first_id: string | null;
      last_id: string | null;
      has_more: boolean;
      next_page: string | null;
    };
  };
  const second = await page(`limit=2&after_id=${newestFirst[1]}`);
  t.deepEqual(
    second.data.map((file) => file.id),
    newestFirst.slice(2, 4),
  );
  t.like(second, { first_id: newestFirst[2], last_id: newestFirst[3], has_more: true, next_page: newestFirst[3] });
  const last = await page(`limit=2&after_id=${newestFirst[3]}`);
  t.like(last, { first_id: newestFirst[4], last_id: newestFirst[4], has_more: false, next_page: null });
  const before = await page(`limit=2&before_id=${newestFirst[3]}`);
  t.deepEqual(
    before.data.map((file) => file.id),
    newestFirst.slice(1, 3),
    'the files just newer, newest first',
  );
  t.like(before, { has_more: true, next_page: null });
  t.like(await page(`limit=2&before_id=${newestFirst[1]}`), { first_id: newestFirst[0], has_more: false });
  t.like(await page('limit=20'), { has_more: false, next_page: null });
  t.is((await page('')).data.length, 5, 'a default page of 20');
  t.deepEqual(await page(`page=${newestFirst[3]}`), last);

  // The current API's filter: only the caller's live files among `ids`, newest first, in one page.
  await client.beta.files.delete(ids[2] as string);
  const foreign = await anthropic(app.keys.b).beta.files.upload({ file: await pdfFile(100) });
  const named = await client.beta.files.list({ ids: [ids[0] as string, ids[3] as string, ids[2] as string, foreign.id, ids[0] as string] });
  t.deepEqual(
    named.data.map((file) => file.id),
    [ids[3], ids[0]],
  );
  t.false(named.hasNextPage());

  const bad = async (query: string, message: string) => {
    const response = await checkedFetch(t.context.problems)(`${app.url}/v1/files?${query}`, {
      headers: { 'x-api-key': app.keys.a, 'anthropic-version': '2023-06-01' },
    });
    t.is(response.status, 400, query);
    t.like(await response.json(), { type: 'error', error: { type: 'invalid_request_error', message } });
  };
  await bad('limit=1001', "'limit' must be an integer from 1 to 1000");
  await bad('after_id=file-nope', 'Invalid file ID');
  await bad(`ids[]=${ids[0]}&limit=2`, "'ids' cannot be given with 'limit', 'after_id', 'before_id' or 'page'");
  await bad(`ids[]=${ids[0]}&ids[]=file-nope`, 'Invalid file ID');
  await bad(Array.from({ length: 101 }, (_, i) => `ids[]=file-${String(i).padStart(32, '0')}`).join('&'), "'ids' holds at most 100 file ids");
  await bad(`after_id=${ids[0]}&before_id=${ids[1]}`, "Only one of 'after_id', 'before_id' and 'page' may be given, got 'after_id' and 'before_id'");
});

test('beta.files: a non-PDF, a too-large file, a foreign id, a malformed id, no key and no scope, as the SDK error classes', async (t) => {
  const { app, anthropic } = await setup(t);
  const client = anthropic();
  await shapeBError(
    t,
    client.beta.files.upload({ file: await toFile(Buffer.from('hello'), 'hello.pdf') }),
    Anthropic.BadRequestError,
    'invalid_request_error',
    'File is not a PDF',
  );
  await shapeBError(
    t,
    client.beta.files.upload({ file: await pdfFile(100, 'notes.txt') }),
    Anthropic.BadRequestError,
    'invalid_request_error',
    "The file name must end in '.pdf', be at most 255 bytes and hold no control characters",
  );
  await shapeBError(t, client.beta.files.upload({ file: await pdfFile(LIMIT + 1) }), Anthropic.ContentTooLargeError, 'request_too_large', 'File is too large');

  // Another account's file is answered exactly as one that never existed.
  const foreign = await anthropic(app.keys.b).beta.files.upload({ file: await pdfFile(100) });
  await shapeBError(t, client.beta.files.retrieveMetadata(foreign.id), Anthropic.NotFoundError, 'not_found_error', 'File not found');
  await shapeBError(t, client.beta.files.download(foreign.id), Anthropic.NotFoundError, 'not_found_error', 'File not found');
  await shapeBError(t, client.beta.files.download('file-000000aaaaaaaaaaaaaaaaaaaaaaaaaa'), Anthropic.NotFoundError, 'not_found_error', 'File not found');
  await shapeBError(t, client.beta.files.delete(foreign.id), Anthropic.NotFoundError, 'not_found_error', 'File not found');
  for (const call of [client.beta.files.retrieveMetadata('file-nope'), client.beta.files.download('file-nope'), client.beta.files.delete('file-nope')]) {
    await shapeBError(t, call, Anthropic.BadRequestError, 'invalid_request_error', 'Invalid file ID');
  }
  await shapeBError(t, anthropic('kmg_sk_not-a-key').beta.files.list(), Anthropic.AuthenticationError, 'authentication_error', 'Invalid API key');
  await shapeBError(
    t,
    anthropic(app.keys.readOnly).beta.files.upload({ file: await pdfFile(100) }),
    Anthropic.PermissionDeniedError,
    'permission_error',
    'Forbidden',
  );
  await shapeBError(t, anthropic(app.keys.readOnly).beta.files.delete(foreign.id), Anthropic.PermissionDeniedError, 'permission_error', 'Forbidden');
  t.is((await app.files.usage('acct-a', app.clock.seconds)).files, 0);
  t.deepEqual(await app.tempFiles(), []);
});

test('beta.files: each of the three 429s is a RateLimitError with its message and headers', async (t) => {
  const perMinute = await setup(t, { creationLimiter: new MemoryCreationLimiter({ createsPerMinute: 1, nowMs: () => FIXED_MS }) });
  await perMinute.anthropic().beta.files.upload({ file: await pdfFile(100) });
  const rate = await shapeBError(
    t,
    perMinute.anthropic().beta.files.upload({ file: await pdfFile(100) }),
    Anthropic.RateLimitError,
    'rate_limit_error',
    'Create rate exceeded',
  );
  t.is(rate?.headers?.get('retry-after'), '30');

  const perDay = await setup(t, { creationLimiter: new MemoryCreationLimiter({ bytesPerDay: 1500, nowMs: () => FIXED_MS }) });
  await perDay.anthropic().beta.files.upload({ file: await pdfFile(1000) });
  const ingestion = await shapeBError(
    t,
    perDay.anthropic().beta.files.upload({ file: await pdfFile(1000) }),
    Anthropic.RateLimitError,
    'rate_limit_error',
    'Ingestion quota exceeded',
  );
  t.regex(ingestion?.headers?.get('retry-after') ?? '', /^[0-9]+$/);

  const kept = await setup(t, { limits: { maxFileBytes: LIMIT, maxFiles: 1 } });
  await kept.anthropic().beta.files.upload({ file: await pdfFile(100) });
  const storage = await shapeBError(
    t,
    kept.anthropic().beta.files.upload({ file: await pdfFile(100) }),
    Anthropic.RateLimitError,
    'rate_limit_error',
    'Storage quota exceeded',
  );
  t.is(storage?.headers?.get('x-should-retry'), 'false');
});

test('one store for both shapes: files of either SDK are listed, read and deleted by the other, and count toward the same limits', async (t) => {
  const limiter = new MemoryCreationLimiter({ createsPerMinute: 4, nowMs: () => FIXED_MS });
  const { anthropic, openai } = await setup(t, { limits: { maxFileBytes: LIMIT, maxFiles: 3 }, creationLimiter: limiter });
  const viaOpenAI = await openai().files.create({ file: await openAIFile(pdfOf(200, 0x41), 'openai.pdf'), purpose: 'user_data' });
  const viaAnthropic = await anthropic().beta.files.upload({ file: await pdfFile(300, 'anthropic.pdf', 0x43) });

  const anthropicSees: string[] = [];
  for await (const file of anthropic().beta.files.list()) anthropicSees.push(file.id);
  t.deepEqual(anthropicSees, [viaAnthropic.id, viaOpenAI.id]);
  const openaiSees: string[] = [];
  for await (const file of openai().files.list()) openaiSees.push(file.id);
  t.deepEqual(openaiSees, [viaAnthropic.id, viaOpenAI.id]);

  t.like(await anthropic().beta.files.retrieveMetadata(viaOpenAI.id), { type: 'file', filename: 'openai.pdf', size_bytes: 200, mime_type: 'application/pdf' });
  t.like(await openai().files.retrieve(viaAnthropic.id), { object: 'file', filename: 'anthropic.pdf', bytes: 300, purpose: 'user_data' });
  t.true(Buffer.from(await (await anthropic().beta.files.download(viaOpenAI.id)).arrayBuffer()).equals(pdfOf(200, 0x41)));
  t.true(Buffer.from(await (await openai().files.content(viaAnthropic.id)).arrayBuffer()).equals(pdfOf(300, 0x43)));

  // Three kept files at most, whichever SDK made them.
  await openai().files.create({ file: await openAIFile(pdfOf(100), 'third.pdf'), purpose: 'user_data' });
  await shapeBError(t, anthropic().beta.files.upload({ file: await pdfFile(100) }), Anthropic.RateLimitError, 'rate_limit_error', 'Storage quota exceeded');
  const openaiRefused = await t.throwsAsync(openai().files.create({ file: await openAIFile(pdfOf(100), 'x.pdf'), purpose: 'user_data' }), {
    instanceOf: OpenAI.RateLimitError,
  });
  t.is(openaiRefused?.code, 'storage_quota_exceeded');

  // Deleted through the other shape, the file frees its place; the fourth creation of the minute is the last.
  t.deepEqual(await anthropic().beta.files.delete(viaOpenAI.id), { id: viaOpenAI.id, type: 'file_deleted' });
  t.deepEqual(await openai().files.delete(viaAnthropic.id), { id: viaAnthropic.id, object: 'file', deleted: true });
  await anthropic().beta.files.upload({ file: await pdfFile(100) });
  await shapeBError(t, anthropic().beta.files.upload({ file: await pdfFile(100) }), Anthropic.RateLimitError, 'rate_limit_error', 'Create rate exceeded');
  const minuteRefused = await t.throwsAsync(openai().files.create({ file: await openAIFile(pdfOf(100), 'y.pdf'), purpose: 'user_data' }), {
    instanceOf: OpenAI.RateLimitError,
  });
  t.is(minuteRefused?.code, 'rate_limit_exceeded');
});

async function openAISetup(t: ExecutionContext): Promise<{ app: FilesApp; client: (key: string) => OpenAI }> {
  const app = await filesApp({ limits: { maxFileBytes: LIMIT } });
  t.teardown(() => app.close());
  return { app, client: (key) => new OpenAI({ apiKey: key, baseURL: `${app.url}/v1`, maxRetries: 0 }) };
}

// biome-ignore lint/suspicious/noExplicitAny: any constructor of an APIError subclass
type OpenAIErrorClass = new (...args: any[]) => APIError;

const openAIPdfFile = (bytes: number, name = 'report.pdf') => openAIFile(pdfOf(bytes), name, { type: 'application/pdf' });

test('the openai SDK uploads with expires_after, retrieves, downloads the same bytes and deletes', async (t) => {
  const { app, client } = await openAISetup(t);
  const openai = client(app.keys.a);
  const pdf = pdfOf(5000, 0x42);
  const created = await openai.files.create({
    file: await openAIFile(pdf, 'sdk.pdf', { type: 'application/pdf' }),
    purpose: 'user_data',
    expires_after: { anchor: 'created_at', seconds: 7200 },
  });
  t.like(created, { object: 'file', bytes: 5000, filename: 'sdk.pdf', purpose: 'user_data', status: 'processed' });
  t.is(created.expires_at, created.created_at + 7200);

  t.deepEqual(await openai.files.retrieve(created.id), created);
  const content = await openai.files.content(created.id);
  t.is(content.headers.get('content-type'), 'application/pdf');
  t.true(Buffer.from(await content.arrayBuffer()).equals(pdf));

  t.deepEqual(await openai.files.delete(created.id), { id: created.id, object: 'file', deleted: true });
  await t.throwsAsync(openai.files.retrieve(created.id), { instanceOf: OpenAI.NotFoundError });
});

test('the openai SDK pages through more files than one page, in both orders', async (t) => {
  const { app, client } = await openAISetup(t);
  const openai = client(app.keys.a);
  const ids: string[] = [];
  for (let i = 0; i < 7; i++) {
    ids.push((await openai.files.create({ file: await openAIPdfFile(100 + i, `f${i}.pdf`), purpose: 'user_data' })).id);
    if (i % 3 === 0) app.clock.seconds += 1;
  }
  const seen = async (order?: 'asc' | 'desc') => {
    const out: string[] = [];
    for await (const file of openai.files.list({ limit: 3, ...(order ? { order } : {}) })) out.push(file.id);
    return out;
  };
  const asc = [...ids].sort();
  t.deepEqual(await seen('asc'), asc);
  t.deepEqual(await seen(), [...asc].reverse(), 'desc by default');
  const firstPage = await openai.files.list({ limit: 3, order: 'asc' });
  t.deepEqual(
    firstPage.data.map((file) => file.id),
    asc.slice(0, 3),
  );
  t.true(firstPage.has_more);
});

test('the openai SDK raises its error classes with our codes for 400, 401, 403, 404 and 413', async (t) => {
  const { app, client } = await openAISetup(t);
  const openai = client(app.keys.a);
  const expectError = async (call: Promise<unknown>, errorClass: OpenAIErrorClass, status: number, code: string) => {
    const err = await t.throwsAsync<APIError>(call, { instanceOf: errorClass });
    t.is(err?.constructor, errorClass);
    t.is(err?.status, status, code);
    t.is(err?.code, code);
    t.is(err?.type, status === 401 ? 'authentication_error' : status === 403 ? 'permission_error' : 'invalid_request_error');
    t.regex(err?.requestID ?? '', /^req_[A-Za-z0-9]{32}$/);
  };
  await expectError(openai.files.retrieve('file-nope'), OpenAI.BadRequestError, 400, 'invalid_file_id');
  await expectError(
    openai.files.create({ file: await openAIFile(Buffer.from('hello'), 'hello.pdf'), purpose: 'user_data' }),
    OpenAI.BadRequestError,
    400,
    'invalid_file_format',
  );
  await expectError(
    openai.files.create({ file: await openAIPdfFile(100), purpose: 'user_data', expires_after: { anchor: 'created_at', seconds: 60 } }),
    OpenAI.BadRequestError,
    400,
    'invalid_expires_after',
  );
  await expectError(client('kmg_sk_not-a-key').files.list(), OpenAI.AuthenticationError, 401, 'invalid_api_key');
  await expectError(
    client(app.keys.readOnly).files.create({ file: await openAIPdfFile(100), purpose: 'user_data' }),
    OpenAI.PermissionDeniedError,
    403,
    'forbidden',
  );
  await expectError(openai.files.retrieve('file-000000aaaaaaaaaaaaaaaaaaaaaaaaaa'), OpenAI.NotFoundError, 404, 'file_not_found');
  // 413 has no subclass in the SDK: a plain APIError.
  await expectError(openai.files.create({ file: await openAIPdfFile(LIMIT + 1), purpose: 'user_data' }), APIError, 413, 'file_too_large');
  t.deepEqual(await app.tempFiles(), []);
});
