import type { ExecutionContext, TestFn } from 'ava';
import contentDisposition from 'content-disposition';
import type { BlobStore } from '../../lib/files/blob-store.js';
import type { FileLimits } from '../../lib/files/file-limits.js';
import { filesApp, type FilesApp } from './files-app.js';
import { memoryStores, type Stores } from './file-stores.js';
import { multipart, pdfOf, uploadParts, type Part } from './multipart.js';

interface Response {
  status: number;
  headers: Headers;
  body: Buffer;
  json: unknown;
}

const ANTHROPIC = { 'anthropic-version': '2023-06-01' };

/** A small client for one app: every call is a real HTTP request. */
function client(app: FilesApp) {
  const send = async (
    key: string | undefined,
    method: string,
    path: string,
    body?: { bytes: Buffer; contentType: string },
    extraHeaders: Record<string, string> = {},
  ) => {
    const headers: Record<string, string> = { ...extraHeaders };
    if (key !== undefined) headers.authorization = `Bearer ${key}`;
    if (body) headers['content-type'] = body.contentType;
    const res = await fetch(app.url + path, { method, headers, ...(body ? { body: body.bytes } : {}) });
    const bytes = Buffer.from(await res.arrayBuffer());
    const isJson = res.headers.get('content-type')?.startsWith('application/json') ?? false;
    return { status: res.status, headers: res.headers, body: bytes, json: isJson ? JSON.parse(bytes.toString('utf8')) : undefined };
  };
  return {
    send,
    upload(key: string, pdf: Buffer, name = 'report.pdf', extra: Part[] = []): Promise<Response> {
      const { body, contentType } = multipart(uploadParts(pdf, name, extra));
      return send(key, 'POST', '/v1/files', { bytes: body, contentType });
    },
    async create(key: string, pdf = pdfOf(1000), name = 'report.pdf', extra: Part[] = []): Promise<{ id: string; [field: string]: unknown }> {
      const res = await this.upload(key, pdf, name, extra);
      if (res.status !== 200) throw new Error(`upload failed: ${res.status} ${res.body.toString()}`);
      return res.json as { id: string };
    },
    get: (key: string | undefined, path: string) => send(key, 'GET', path),
    del: (key: string | undefined, path: string) => send(key, 'DELETE', path),
    /** The same API in Anthropic's shape: `anthropic-version` on every request, no `purpose`. */
    anthropic: {
      upload(key: string, pdf: Buffer, name = 'report.pdf', extra: Part[] = []): Promise<Response> {
        const { body, contentType } = multipart([...extra, { name: 'file', value: pdf, filename: name, contentType: 'application/pdf' }]);
        return send(key, 'POST', '/v1/files?beta=true', { bytes: body, contentType }, ANTHROPIC);
      },
      get: (key: string, path: string) => send(key, 'GET', path, undefined, ANTHROPIC),
      del: (key: string, path: string) => send(key, 'DELETE', path, undefined, ANTHROPIC),
    },
  };
}

const expiry = (seconds: number): Part[] => [
  { name: 'expires_after[anchor]', value: 'created_at' },
  { name: 'expires_after[seconds]', value: String(seconds) },
];

const shapeA = (message: string, code: string, type = 'invalid_request_error') => ({ error: { message, type, param: null, code } });
const NOT_FOUND = shapeA('File not found', 'file_not_found');
const INVALID_ID = shapeA('Invalid file ID', 'invalid_file_id');

/** The headers of a response but its request id and date, for "byte-identical apart from the request id". */
function sameHeaders(headers: Headers): string[] {
  return [...headers].filter(([name]) => name !== 'x-request-id' && name !== 'date').map(([name, value]) => `${name}: ${value}`);
}

/** A well-formed id that no upload made. */
const NEVER = 'file-000000aaaaaaaaaaaaaaaaaaaaaaaaaa';

async function blobIds(blobs: BlobStore): Promise<string[]> {
  const ids: string[] = [];
  for await (const blob of blobs.list()) ids.push(blob.id);
  return ids.sort();
}

/** A files app on new stores from `makeStores`, closed with them when the test ends. */
async function setup(t: ExecutionContext, makeStores: () => Promise<Stores>, limits?: Partial<FileLimits>) {
  const stores = await makeStores();
  const app = await filesApp({ files: stores.files, blobs: stores.blobs, ...(limits ? { limits } : {}) });
  t.teardown(async () => {
    await app.close();
    await stores.close();
  });
  return { app, api: client(app) };
}

/**
 * The files API over real HTTP on a composed app (gatewayErrors + apiKey + filesRouter), run once
 * per pair of stores: what the stores keep, find and refuse. The scope checks and their order are
 * test/spec/check-order's.
 */
export function filesApiSuite(test: TestFn, name: string, makeStores: () => Promise<Stores>): void {
  /** Retrieve, download and delete of `id` all answer 404 File not found. */
  async function assertGone(t: ExecutionContext, api: ReturnType<typeof client>, key: string, id: string) {
    const answers = {
      retrieve: await api.get(key, `/v1/files/${id}`),
      download: await api.get(key, `/v1/files/${id}/content`),
      delete: await api.del(key, `/v1/files/${id}`),
    };
    for (const [what, res] of Object.entries(answers)) {
      t.is(res.status, 404, what);
      t.deepEqual(res.json, NOT_FOUND, what);
    }
  }

  test(`${name}: upload, retrieve, download and delete a file, which is then gone from every endpoint`, async (t) => {
    const { app, api } = await setup(t, makeStores);
    const pdf = pdfOf(4321, 0x41);
    const created = await api.create(app.keys.a, pdf, 'Annual report.pdf');
    const expected = {
      id: created.id,
      object: 'file',
      bytes: 4321,
      created_at: app.clock.seconds,
      filename: 'Annual report.pdf',
      purpose: 'user_data',
      status: 'processed',
    };
    t.deepEqual(created, expected);

    const retrieved = await api.get(app.keys.a2, `/v1/files/${created.id}`);
    t.is(retrieved.status, 200);
    t.deepEqual(retrieved.json, expected, 'every key of the account sees the file');
    t.regex(retrieved.headers.get('x-request-id') ?? '', /^req_[A-Za-z0-9]{32}$/);

    const content = await api.get(app.keys.a, `/v1/files/${created.id}/content`);
    t.is(content.status, 200);
    t.true(content.body.equals(pdf));
    t.is(content.headers.get('content-type'), 'application/pdf');
    t.is(content.headers.get('content-length'), '4321');
    t.is(content.headers.get('cache-control'), 'private, no-store');
    t.is(content.headers.get('x-content-type-options'), 'nosniff');
    t.is(content.headers.get('content-security-policy'), 'sandbox');
    t.is(content.headers.get('content-disposition'), 'attachment; filename="Annual report.pdf"');

    const deleted = await api.del(app.keys.a, `/v1/files/${created.id}`);
    t.is(deleted.status, 200);
    t.deepEqual(deleted.json, { id: created.id, object: 'file', deleted: true });
    t.deepEqual(await blobIds(app.blobs), []);

    await assertGone(t, api, app.keys.a, created.id);
    const list = await api.get(app.keys.a, '/v1/files');
    t.deepEqual(list.json, { object: 'list', data: [], first_id: null, last_id: null, has_more: false });
  });

  test(`${name}: another account's file answers exactly as a file that never existed`, async (t) => {
    const { app, api } = await setup(t, makeStores);
    const { id } = await api.create(app.keys.a, pdfOf(2000));
    await api.create(app.keys.b);
    const requests: Array<[string, (id: string) => Promise<Response>]> = [
      ['retrieve', (fileId) => api.get(app.keys.b, `/v1/files/${fileId}`)],
      ['download', (fileId) => api.get(app.keys.b, `/v1/files/${fileId}/content`)],
      ['delete', (fileId) => api.del(app.keys.b, `/v1/files/${fileId}`)],
    ];
    for (const [what, request] of requests) {
      const foreign = await request(id);
      const missing = await request(NEVER);
      t.is(foreign.status, 404, what);
      t.deepEqual(foreign.json, NOT_FOUND, what);
      t.true(foreign.body.equals(missing.body), `${what}: same body bytes`);
      t.deepEqual(sameHeaders(foreign.headers), sameHeaders(missing.headers), `${what}: same headers`);
      t.not(foreign.headers.get('x-request-id'), missing.headers.get('x-request-id'));
    }
    const listB = await api.get(app.keys.b, `/v1/files?after=${id}&order=asc`);
    t.is(listB.status, 200);
    t.false(JSON.stringify(listB.json).includes(id));
    t.is((await api.get(app.keys.a, `/v1/files/${id}/content`)).body.length, 2000, 'the file is untouched');
  });

  test(`${name}: an expired file is 404 everywhere from the second it expires, and stops counting`, async (t) => {
    const { app, api } = await setup(t, makeStores, { maxFiles: 1 });
    const created = await api.create(app.keys.a, pdfOf(1000), 'short.pdf', expiry(3600));
    t.is(created.expires_at, app.clock.seconds + 3600);
    t.deepEqual(Object.keys(created), ['id', 'object', 'bytes', 'created_at', 'filename', 'purpose', 'status', 'expires_at']);

    const full = await api.upload(app.keys.a, pdfOf(1000));
    t.is(full.status, 429);
    t.deepEqual(full.json, shapeA('Storage quota exceeded', 'storage_quota_exceeded', 'rate_limit_error'));
    t.is(full.headers.get('x-should-retry'), 'false');

    app.clock.seconds += 3599;
    t.is((await api.get(app.keys.a, `/v1/files/${created.id}`)).status, 200);
    app.clock.seconds += 1;
    await assertGone(t, api, app.keys.a, created.id);
    t.deepEqual((await api.get(app.keys.a, '/v1/files')).json, { object: 'list', data: [], first_id: null, last_id: null, has_more: false });
    t.is((await api.upload(app.keys.a, pdfOf(1000))).status, 200, 'the expired file no longer counts');
  });

  test(`${name}: the kept limits refuse with 429 and leave no bytes behind`, async (t) => {
    const { app, api } = await setup(t, makeStores, { maxStoredBytes: 2500, maxFiles: 3 });
    await api.create(app.keys.a, pdfOf(1000));
    await api.create(app.keys.a, pdfOf(1000));
    const before = await blobIds(app.blobs);
    const tooManyBytes = await api.upload(app.keys.a, pdfOf(501));
    t.is(tooManyBytes.status, 429);
    t.deepEqual(tooManyBytes.json, shapeA('Storage quota exceeded', 'storage_quota_exceeded', 'rate_limit_error'));
    t.is(tooManyBytes.headers.get('x-should-retry'), 'false');
    t.deepEqual(await blobIds(app.blobs), before);
    t.is((await api.upload(app.keys.a, pdfOf(400))).status, 200);
    const tooManyFiles = await api.upload(app.keys.a, pdfOf(50));
    t.is(tooManyFiles.status, 429);
    t.deepEqual(tooManyFiles.json, shapeA('Storage quota exceeded', 'storage_quota_exceeded', 'rate_limit_error'));
    t.is((await api.upload(app.keys.b, pdfOf(2500))).status, 200, 'exactly the byte limit, in an account of its own');
  });

  test(`${name}: list pages in creation order, with an after that survives deletion and exact has_more`, async (t) => {
    const { app, api } = await setup(t, makeStores);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      ids.push((await api.create(app.keys.a, pdfOf(100 + i), `f${i}.pdf`)).id);
      if (i % 2 === 1) app.clock.seconds += 1; // some in the same second, some not
    }
    await api.create(app.keys.b);
    const page = async (query: string) =>
      (await api.get(app.keys.a, `/v1/files${query}`)).json as {
        object: string;
        data: Array<{ id: string }>;
        first_id: string | null;
        last_id: string | null;
        has_more: boolean;
      };
    const desc = [...ids].sort().reverse();
    const asc = [...ids].sort();
    t.deepEqual(asc.slice(0, 2), [ids[0], ids[1]].sort(), 'files of the same second are ordered by id');
    t.deepEqual(asc.slice(2, 4), [ids[2], ids[3]].sort());
    t.deepEqual(asc.slice(4), [ids[4], ids[5]].sort());
    t.true(
      ids.slice(0, 2).every((id) => id < (ids[2] ?? '')),
      'a later second sorts after',
    );

    const all = await page('');
    t.deepEqual(
      all.data.map((file) => file.id),
      desc,
      'desc by default',
    );
    t.deepEqual([all.first_id, all.last_id], [desc[0], desc[5]]);
    t.false(all.has_more);
    t.deepEqual(
      (await page('?order=asc')).data.map((file) => file.id),
      asc,
    );

    const first = await page('?order=asc&limit=4');
    t.deepEqual(
      first.data.map((file) => file.id),
      asc.slice(0, 4),
    );
    t.true(first.has_more);
    const second = await page(`?order=asc&limit=2&after=${first.last_id}`);
    t.deepEqual(
      second.data.map((file) => file.id),
      asc.slice(4),
    );
    t.false(second.has_more, 'exactly the last two: nothing more follows');
    t.deepEqual({ first: second.first_id, last: second.last_id }, { first: asc[4], last: asc[5] });

    await api.del(app.keys.a, `/v1/files/${asc[3]}`);
    const afterDeleted = await page(`?order=asc&limit=10&after=${asc[3]}`);
    t.deepEqual(
      afterDeleted.data.map((file) => file.id),
      asc.slice(4),
      'a deleted file still marks a position',
    );
    const descAfterDeleted = await page(`?limit=10&after=${asc[3]}`);
    t.deepEqual(
      descAfterDeleted.data.map((file) => file.id),
      desc.slice(desc.indexOf(asc[3] ?? '') + 1),
    );
    const end = await page(`?order=asc&after=${asc[5]}`);
    t.deepEqual(end, { object: 'list', data: [], first_id: null, last_id: null, has_more: false });
    t.is((await page('?limit=10000')).data.length, 5);
  });

  test(`${name}: Anthropic's shape over the same store: newest first by after_id, before_id and page, ids; one set of kept limits`, async (t) => {
    const { app, api } = await setup(t, makeStores, { maxFiles: 5 });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const upload =
        i % 2 === 0 ? await api.anthropic.upload(app.keys.a, pdfOf(100 + i), `f${i}.pdf`) : await api.upload(app.keys.a, pdfOf(100 + i), `f${i}.pdf`);
      t.is(upload.status, 200);
      ids.push((upload.json as { id: string }).id);
      if (i === 1) app.clock.seconds += 1;
    }
    await api.create(app.keys.b);
    const newest = [...ids].reverse();
    const page = async (query: string) =>
      (await api.anthropic.get(app.keys.a, `/v1/files?beta=true&${query}`)).json as Record<string, unknown> & { data: Array<{ id: string }> };
    const first = await page('limit=3');
    t.deepEqual(
      first.data.map((file) => file.id),
      newest.slice(0, 3),
    );
    t.like(first, { first_id: newest[0], last_id: newest[2], has_more: true, next_page: newest[2] });
    t.deepEqual(first.data[0], {
      id: newest[0],
      type: 'file',
      filename: 'f3.pdf',
      mime_type: 'application/pdf',
      size_bytes: 103,
      created_at: new Date(app.clock.seconds * 1000).toISOString().replace('.000Z', 'Z'),
      downloadable: true,
    });
    const oldest = (await api.anthropic.get(app.keys.a, `/v1/files/${newest[3]}`)).json;
    t.deepEqual(await page(`limit=3&page=${newest[2]}`), { data: [oldest], first_id: newest[3], last_id: newest[3], has_more: false, next_page: null });
    t.deepEqual(
      (await page(`limit=3&after_id=${newest[0]}`)).data.map((file) => file.id),
      newest.slice(1, 4),
    );
    const before = await page(`limit=2&before_id=${newest[3]}`);
    t.deepEqual(
      before.data.map((file) => file.id),
      newest.slice(1, 3),
    );
    t.like(before, { first_id: newest[1], last_id: newest[2], has_more: true, next_page: null });

    // One set of kept limits: the fifth file is the last, in either shape; a deletion in the other shape frees a place.
    t.is((await api.anthropic.upload(app.keys.a, pdfOf(100), 'fifth.pdf')).status, 200);
    const refused = await api.anthropic.upload(app.keys.a, pdfOf(100));
    t.is(refused.status, 429);
    t.deepEqual(refused.json, {
      type: 'error',
      error: { type: 'rate_limit_error', message: 'Storage quota exceeded' },
      request_id: refused.headers.get('request-id'),
    });
    t.is(refused.headers.get('x-should-retry'), 'false');
    t.is((await api.upload(app.keys.a, pdfOf(100))).status, 429);
    t.deepEqual((await api.anthropic.del(app.keys.a, `/v1/files/${ids[1]}`)).json, { id: ids[1], type: 'file_deleted' });
    t.is((await api.upload(app.keys.a, pdfOf(100))).status, 200);
    const foreign = await api.create(app.keys.b);
    const named = await page(`ids[]=${ids[0]}&ids[]=${ids[1]}&ids[]=${ids[2]}&ids[]=${foreign.id}&ids[]=${NEVER}`);
    t.deepEqual(
      named.data.map((file) => file.id),
      [ids[2], ids[0]],
      "only the caller's live files, newest first",
    );
    t.like(named, { has_more: false, next_page: null });

    // An expiry from either form, gone at the same second from both shapes.
    const expiring = await api.anthropic.upload(app.keys.b, pdfOf(100), 'brief.pdf', [{ name: 'expires_in_seconds', value: '3600' }]);
    const expiringId = (expiring.json as { id: string }).id;
    t.like(expiring.json, { expires_at: new Date((app.clock.seconds + 3600) * 1000).toISOString().replace('.000Z', 'Z') });
    t.like((await api.get(app.keys.b, `/v1/files/${expiringId}`)).json, { expires_at: app.clock.seconds + 3600 });
    app.clock.seconds += 3600;
    t.is((await api.anthropic.get(app.keys.b, `/v1/files/${expiringId}`)).status, 404);
    await assertGone(t, api, app.keys.b, expiringId);
  });

  test(`${name}: the download name is quoted safely, with filename* for non-ASCII names`, async (t) => {
    const { app, api } = await setup(t, makeStores);
    // Names as a browser or undici sends them: '"' as %22, which pdfUpload() decodes.
    const cases: Array<[string, string, string]> = [
      ['plain.pdf', 'plain.pdf', 'attachment; filename="plain.pdf"'],
      ['say %22hi%22; x=y.pdf', 'say "hi"; x=y.pdf', 'attachment; filename="say \\"hi\\"; x=y.pdf"'],
      ['back\\slash.pdf', 'slash.pdf', 'attachment; filename="slash.pdf"'],
      ['résumé.pdf', 'résumé.pdf', 'attachment; filename="r_sum_.pdf"; filename*=UTF-8\'\'r%C3%A9sum%C3%A9.pdf'],
      ['履歴書.pdf', '履歴書.pdf', 'attachment; filename="___.pdf"; filename*=UTF-8\'\'%E5%B1%A5%E6%AD%B4%E6%9B%B8.pdf'],
      ['100%25.pdf', '100%25.pdf', 'attachment; filename="100%25.pdf"; filename*=UTF-8\'\'100%2525.pdf'],
    ];
    for (const [sent, stored, header] of cases) {
      const { id, filename } = await api.create(app.keys.a, pdfOf(100), sent);
      t.is(filename, stored);
      const res = await api.get(app.keys.a, `/v1/files/${id}/content`);
      t.is(res.headers.get('content-disposition'), header, sent);
      t.is(contentDisposition.parse(header).parameters.filename, stored, 'a client reads back the stored name');
      t.is(res.headers.get('content-type'), 'application/pdf');
    }
  });
}

/**
 * The files API's answers that come before any store is asked (the file id's form, the list's
 * parameters, routes and methods): the same whatever the stores, so run once, on memory stores.
 */
export function filesRequestSuite(test: TestFn): void {
  test('a malformed file id is 400 Invalid file ID on every endpoint that takes one', async (t) => {
    const { app, api } = await setup(t, memoryStores);
    const malformed = [
      'abc',
      'file-short',
      `file-${'a'.repeat(31)}`,
      `file-${'a'.repeat(33)}`,
      `file-${'a'.repeat(31)}.`,
      `FILE-${'a'.repeat(32)}`,
      `file-${'a'.repeat(30)}%2F`,
    ];
    for (const id of malformed) {
      for (const res of [
        await api.get(app.keys.a, `/v1/files/${id}`),
        await api.get(app.keys.a, `/v1/files/${id}/content`),
        await api.del(app.keys.a, `/v1/files/${id}`),
      ]) {
        t.is(res.status, 400, id);
        t.deepEqual(res.json, INVALID_ID);
      }
    }
  });

  test("invalid list parameters are 400 with the parameter's code", async (t) => {
    const { app, api } = await setup(t, memoryStores);
    const rows: Array<[string, unknown]> = [
      ['order=ASC', shapeA("'order' must be 'asc' or 'desc'", 'invalid_order')],
      ['order=newest', shapeA("'order' must be 'asc' or 'desc'", 'invalid_order')],
      ['order=asc&order=desc', shapeA("'order' must be 'asc' or 'desc'", 'invalid_order')],
      ['limit=0', shapeA("'limit' must be an integer from 1 to 10000", 'invalid_limit')],
      ['limit=10001', shapeA("'limit' must be an integer from 1 to 10000", 'invalid_limit')],
      ['limit=-1', shapeA("'limit' must be an integer from 1 to 10000", 'invalid_limit')],
      ['limit=1.5', shapeA("'limit' must be an integer from 1 to 10000", 'invalid_limit')],
      ['limit=ten', shapeA("'limit' must be an integer from 1 to 10000", 'invalid_limit')],
      ['limit=', shapeA("'limit' must be an integer from 1 to 10000", 'invalid_limit')],
      ['after=file-123', INVALID_ID],
      ['after=', INVALID_ID],
    ];
    for (const [query, body] of rows) {
      const res = await api.get(app.keys.a, `/v1/files?${query}`);
      t.is(res.status, 400, query);
      t.deepEqual(res.json, body, query);
    }
  });

  test("a wrong method is 405 and an unknown path 404, in the API's error shape", async (t) => {
    const { app, api } = await setup(t, memoryStores);
    const { id } = await api.create(app.keys.a);
    for (const [method, path] of [
      ['PUT', '/v1/files'],
      ['PATCH', `/v1/files/${id}`],
      ['POST', `/v1/files/${id}/content`],
      ['DELETE', '/v1/files'],
    ] as const) {
      const res = await api.send(app.keys.a, method, path);
      t.is(res.status, 405, `${method} ${path}`);
      t.deepEqual(res.json, shapeA(`Method ${method} is not allowed on this URL`, 'method_not_allowed'));
    }
    const unknown = await api.get(app.keys.a, `/v1/files/${id}/content/more`);
    t.is(unknown.status, 404);
    t.deepEqual(unknown.json, shapeA(`Unknown request URL: GET /v1/files/${id}/content/more`, 'unknown_url'));
    // Paths match exactly: in a gateway that authenticates by prefix, these never saw the key check.
    for (const path of ['/V1/files', '/v1/files/', `/v1/Files/${id}`, `/v1/files/${id}/`]) {
      const res = await api.get(app.keys.a, path);
      t.deepEqual({ status: res.status, json: res.json }, { status: 404, json: shapeA(`Unknown request URL: GET ${path}`, 'unknown_url') }, path);
    }
  });
}
