import fs, { existsSync, readdirSync, readlinkSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { errors, type GatewayError } from '../../lib/errors/gateway-error.js';
import { pdfUpload } from '../../lib/files/pdf-upload.js';
import { abortUploadMidway, droppedConnection, filesApp, type FilesApp } from '../helpers/files-app.js';
import { multipart, pdfOf, uploadParts, type Part } from '../helpers/multipart.js';
import { rawExchange, rawRequest, type RawResponse } from '../helpers/raw-request.js';

// Small uploads keep this file fast; the real 26,214,400-byte boundary has its own tests, at the end.
const LIMIT = 100_000;
const ENVELOPE = 64 * 1024;

/** A fresh app per test: the temp dir checks must not see another test's upload. */
async function withApp(t: ExecutionContext, limits = { maxFileBytes: LIMIT }): Promise<FilesApp> {
  const app = await filesApp({ limits });
  t.teardown(() => app.close());
  return app;
}

interface UploadOptions {
  chunked?: boolean;
  headers?: Record<string, string>;
}

function upload(app: FilesApp, parts: Part[], options: UploadOptions = {}): Promise<RawResponse> {
  const { body, contentType } = multipart(parts);
  return rawRequest(`${app.url}/v1/files`, {
    headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': contentType, ...options.headers },
    body,
    chunked: options.chunked ?? false,
  });
}

const json = (res: RawResponse): unknown => JSON.parse(res.body.toString('utf8'));

/** The response is `expected` in Shape A, with a request id, and the upload left nothing behind. */
async function isError(t: ExecutionContext, app: FilesApp, res: RawResponse, expected: GatewayError): Promise<void> {
  t.is(res.status, expected.status);
  t.deepEqual(json(res), { error: { message: expected.message, type: expected.type, param: null, code: expected.code } });
  t.regex(String(res.headers['x-request-id']), /^req_[A-Za-z0-9]{32}$/);
  t.deepEqual(await app.tempFiles(), []);
  t.deepEqual(await app.files.list('acct-a', { order: 'asc', limit: 10 }, app.clock.seconds), { files: [], hasMore: false });
  t.deepEqual(
    app.serverErrors.filter((err) => !droppedConnection(err)),
    [],
  );
}

/** Endless chunks after `head`: only a server that answers mid-body lets the request finish. */
function* endless(head: Buffer): Iterable<Buffer> {
  yield head;
  for (;;) yield Buffer.alloc(64 * 1024, 0x20);
}

test('a valid upload is answered with the file object and leaves no temp file', async (t) => {
  const app = await withApp(t);
  const pdf = pdfOf(5000);
  const res = await upload(app, uploadParts(pdf, 'Q3 report.pdf'));
  t.is(res.status, 200);
  const body = json(res) as Record<string, unknown>;
  t.deepEqual(Object.keys(body), ['id', 'object', 'bytes', 'created_at', 'filename', 'purpose', 'status']);
  t.like(body, { object: 'file', bytes: 5000, created_at: app.clock.seconds, filename: 'Q3 report.pdf', purpose: 'user_data', status: 'processed' });
  t.regex(String(body.id), /^file-[A-Za-z0-9_-]{32}$/);
  const stored = await app.blobs.get(String(body.id));
  t.truthy(stored);
  const chunks: Buffer[] = [];
  for await (const chunk of stored ?? []) chunks.push(chunk as Buffer);
  t.true(Buffer.concat(chunks).equals(pdf));
  t.deepEqual(await app.tempFiles(), []);
});

// Serial: it slows every file's close in this worker while it runs.
test.serial('a temp file slow to close is waited for: the upload is answered, not taken for a stalled parse', async (t) => {
  const app = await withApp(t);
  const close = fs.close;
  // Longer than two stall checks: the parse moves nothing while the disk closes the file.
  fs.close = ((fd: number, done: (err: NodeJS.ErrnoException | null) => void) => setTimeout(() => close(fd, done), 1500)) as unknown as typeof fs.close;
  const res = await upload(app, uploadParts(pdfOf(5000))).finally(() => (fs.close = close));
  t.is(res.status, 200, res.body.toString('utf8'));
  t.like(json(res), { object: 'file', bytes: 5000 });
  t.deepEqual(await app.tempFiles(), []);
});

test('exactly maxFileBytes is accepted and one byte more is 413, with and without Content-Length', async (t) => {
  const app = await withApp(t);
  for (const chunked of [false, true]) {
    const accepted = await upload(app, uploadParts(pdfOf(LIMIT)), { chunked });
    t.is(accepted.status, 200, `exact size, chunked: ${chunked}`);
    t.is((json(accepted) as { bytes: number }).bytes, LIMIT);
    const refused = await upload(app, uploadParts(pdfOf(LIMIT + 1)), { chunked });
    t.is(refused.status, 413, `one byte over, chunked: ${chunked}`);
    t.deepEqual(json(refused), { error: { message: 'File is too large', type: 'invalid_request_error', param: null, code: 'file_too_large' } });
    t.is(refused.headers.connection, 'close');
  }
  t.deepEqual(await app.tempFiles(), []);
});

test('a Content-Length over the limit is 413 before the body is read, promptly, closing the connection', async (t) => {
  const app = await withApp(t);
  const { contentType } = multipart([]);
  const res = await rawRequest(`${app.url}/v1/files`, {
    headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': contentType, 'content-length': String(10 * 1024 ** 3) },
    body: endless(Buffer.alloc(0)),
  });
  await isError(t, app, res, errors.fileTooLarge());
  t.is(res.headers.connection, 'close');
});

test('a chunked body growing past the limit is cut off mid-stream with 413, closing the connection', async (t) => {
  const app = await withApp(t);
  const { body, contentType } = multipart(uploadParts(pdfOf(1000)));
  const head = body.subarray(0, body.indexOf('%PDF-') + 5);
  const res = await rawRequest(`${app.url}/v1/files`, {
    headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': contentType },
    body: endless(head),
  });
  await isError(t, app, res, errors.fileTooLarge());
  t.is(res.headers.connection, 'close');
});

test('a chunked body growing past the limit outside the file part is cut off too', async (t) => {
  const app = await withApp(t);
  const { body, contentType } = multipart([
    { name: 'purpose', value: 'user_data' },
    { name: 'upload', value: 'x', filename: 'other.pdf', contentType: 'application/pdf' },
  ]);
  const head = body.subarray(0, body.lastIndexOf('x'));
  const res = await rawRequest(`${app.url}/v1/files`, {
    headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': contentType },
    body: endless(head),
  });
  await isError(t, app, res, errors.fileTooLarge());
  t.true(res.bytesSent > LIMIT + ENVELOPE);
});

test('after a refusal mid-body the rest of the body is read and dropped: a client that writes it all reads the answer', async (t) => {
  // As curl does with a file: every byte is written before the answer is read (node:http would
  // give up writing once answered). A server that stopped reading would block it, then reset.
  t.timeout(20_000);
  const app = await withApp(t);
  const { body, contentType } = multipart(uploadParts(pdfOf(LIMIT)));
  const head = body.subarray(0, body.indexOf('%PDF-') + 5);
  // The body is ASCII here: a string's length is its byte count.
  const chunk = (data: string) => `${data.length.toString(16)}\r\n${data}\r\n`;
  function* chunks() {
    yield chunk(head.toString('ascii'));
    for (let sent = 0; sent < 16 * 1024 ** 2; sent += 64 * 1024) yield chunk(' '.repeat(64 * 1024));
    yield '0\r\n\r\n';
  }
  const { answer, reset } = await rawExchange(
    app.url,
    `POST /v1/files HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${app.keys.a}\r\nContent-Type: ${contentType}\r\nTransfer-Encoding: chunked\r\n\r\n`,
    chunks(),
  );
  t.false(reset, 'the connection ends cleanly, with every byte written');
  t.regex(answer, /^HTTP\/1\.1 413 /);
  t.true(answer.includes('"code":"file_too_large"'));
  t.deepEqual(await app.tempFiles(), []);
});

test('a Content-Encoding is refused with 415 whatever it is, never decompressed', async (t) => {
  const app = await withApp(t);
  for (const encoding of ['gzip', 'br', 'identity']) {
    const res = await upload(app, uploadParts(pdfOf(1000)), { headers: { 'content-encoding': encoding } });
    await isError(t, app, res, errors.unsupportedContentEncoding());
    t.is(res.headers.connection, 'close');
  }
});

test('a body that is not multipart/form-data is 400 invalid_content_type', async (t) => {
  const app = await withApp(t);
  const auth = { authorization: `Bearer ${app.keys.a}` };
  const bodies: Array<[Record<string, string>, Buffer]> = [
    [{ 'content-type': 'application/json' }, Buffer.from('{"purpose":"user_data"}')],
    [{ 'content-type': 'application/x-www-form-urlencoded' }, Buffer.from('purpose=user_data')],
    [{ 'content-type': 'application/pdf' }, pdfOf(100)],
    [{}, pdfOf(100)],
    [{ 'content-type': 'multipart/mixed; boundary=abc' }, Buffer.from('--abc--\r\n')],
  ];
  for (const [headers, body] of bodies) {
    const res = await rawRequest(`${app.url}/v1/files`, { headers: { ...auth, ...headers }, body });
    await isError(t, app, res, errors.invalidContentType('multipart/form-data'));
  }
  const noBoundary = await rawRequest(`${app.url}/v1/files`, {
    headers: { ...auth, 'content-type': 'multipart/form-data' },
    body: multipart(uploadParts(pdfOf(100))).body,
  });
  await isError(t, app, noBoundary, errors.invalidContentType('multipart/form-data with a boundary'));
});

test('checks run in order: encoding, then content type, then declared length', async (t) => {
  const app = await withApp(t);
  const send = (headers: Record<string, string>) =>
    rawRequest(`${app.url}/v1/files`, { headers: { authorization: `Bearer ${app.keys.a}`, ...headers }, body: endless(Buffer.alloc(0)) });
  const huge = String(10 * 1024 ** 3);
  await isError(
    t,
    app,
    await send({ 'content-encoding': 'gzip', 'content-type': 'application/json', 'content-length': huge }),
    errors.unsupportedContentEncoding(),
  );
  await isError(t, app, await send({ 'content-type': 'application/json', 'content-length': huge }), errors.invalidContentType('multipart/form-data'));
});

test('exactly one file part is required: none, two, or a plain field are 400 missing_file', async (t) => {
  const app = await withApp(t);
  const pdf = pdfOf(1000);
  const cases: Part[][] = [
    [{ name: 'purpose', value: 'user_data' }],
    uploadParts(pdf, 'a.pdf', [{ name: 'file', value: pdf, filename: 'b.pdf', contentType: 'application/pdf' }]),
    [
      { name: 'purpose', value: 'user_data' },
      { name: 'file', value: pdf },
    ],
    [
      { name: 'purpose', value: 'user_data' },
      { name: 'document', value: pdf, filename: 'a.pdf', contentType: 'application/pdf' },
    ],
  ];
  for (const parts of cases) await isError(t, app, await upload(app, parts), errors.missingFile());
});

test('a file part without a Content-Type is still the file', async (t) => {
  const app = await withApp(t);
  const res = await upload(app, [
    { name: 'purpose', value: 'user_data' },
    { name: 'file', value: pdfOf(1000), filename: 'plain.pdf' },
  ]);
  t.is(res.status, 200);
  t.like(json(res), { filename: 'plain.pdf', bytes: 1000 });
});

test('purpose must be user_data, given once', async (t) => {
  const app = await withApp(t);
  const file: Part = { name: 'file', value: pdfOf(1000), filename: 'a.pdf', contentType: 'application/pdf' };
  const cases: Part[][] = [
    [file],
    [{ name: 'purpose', value: 'assistants' }, file],
    [{ name: 'purpose', value: 'USER_DATA' }, file],
    [{ name: 'purpose', value: 'user_data' }, { name: 'purpose', value: 'user_data' }, file],
  ];
  for (const parts of cases) await isError(t, app, await upload(app, parts), errors.invalidPurpose());
});

test('the file name must end in lower-case .pdf, be 1..255 bytes and hold no control or format characters', async (t) => {
  const app = await withApp(t);
  const names = [
    'report.txt',
    'report.PDF',
    'report.pdf.exe',
    '',
    'dir/',
    `${'a'.repeat(252)}.pdf`, // 256 bytes
    `${'é'.repeat(126)}.pdf`, // 256 bytes in UTF-8
    'tab\there.pdf',
    'bell\x07.pdf',
    'del\x7f.pdf',
    // Format characters (Unicode category Cf): right-to-left override, zero-width space, BOM, isolate.
    'invoice\u202Efdp.exe.pdf',
    'zero\u200Bwidth.pdf',
    '\uFEFFbom.pdf',
    'iso\u2066late.pdf',
    // What a name in bytes that are not UTF-8 is decoded to.
    'r\uFFFDsum\uFFFD.pdf',
  ];
  for (const name of names) {
    const res = await upload(app, uploadParts(pdfOf(1000), name));
    t.is(res.status, 400, JSON.stringify(name));
    await isError(t, app, res, errors.invalidFileName());
  }
});

test('file names are kept as sent when sane, and directory parts are never honoured', async (t) => {
  const app = await withApp(t);
  const cases: Array<[string, string]> = [
    [`${'a'.repeat(251)}.pdf`, `${'a'.repeat(251)}.pdf`],
    ['résumé 履歴書.pdf', 'résumé 履歴書.pdf'],
    ['.pdf', '.pdf'],
    // A '"' as browsers and fetch send it, and as a quoted-pair (RFC 9110).
    ["it's; a=%22b%22.pdf", 'it\'s; a="b".pdf'],
    ['it\'s; a=\\"b\\".pdf', 'it\'s; a="b".pdf'],
    ['../../etc/passwd.pdf', 'passwd.pdf'],
    ['/abs/path/x.pdf', 'x.pdf'],
    ['C:\\Users\\me\\y.pdf', 'y.pdf'],
    ['..\\..\\z.pdf', 'z.pdf'],
  ];
  for (const [sent, kept] of cases) {
    const res = await upload(app, uploadParts(pdfOf(1000), sent));
    t.is(res.status, 200, sent);
    t.is((json(res) as { filename: string }).filename, kept);
  }
});

test('the bytes must hold %PDF- within the first 1,024 bytes', async (t) => {
  const app = await withApp(t);
  const at = (offset: number) => {
    const bytes = Buffer.alloc(2000, 0x20);
    bytes.write('%PDF-', offset);
    return bytes;
  };
  for (const bytes of [at(1020), Buffer.alloc(0), Buffer.from('%PDF'), Buffer.from('PK\x03\x04 not a pdf'), Buffer.from('%pdf-1.7')]) {
    await isError(t, app, await upload(app, uploadParts(bytes)), errors.invalidFileFormat());
  }
  const accepted = await upload(app, uploadParts(at(1019)));
  t.is(accepted.status, 200);
});

test("a field the upload form does not have is 400 naming it, the other shape's expiry pointing to this shape's own; nothing is stored", async (t) => {
  const app = await withApp(t);
  const openAIExpiry = "an upload in OpenAI's shape sets its expiry with 'expires_after[anchor]' and 'expires_after[seconds]'";
  const cases: Array<[Part[], GatewayError]> = [
    [[{ name: 'expires_in_seconds', value: '3600' }], errors.unknownUploadField('expires_in_seconds', openAIExpiry)],
    [
      [
        { name: 'expires_after[anchor]', value: 'created_at' },
        { name: 'expires_after[seconds]', value: '3600' },
        { name: 'expires_in_seconds', value: '3600' },
      ],
      errors.unknownUploadField('expires_in_seconds', openAIExpiry),
    ],
    [[{ name: 'purpose_', value: 'user_data' }], errors.unknownUploadField('purpose_')],
    [[{ name: 'bell\x07', value: 'x' }], errors.unknownUploadField('bell\x07')],
  ];
  for (const [extra, expected] of cases) await isError(t, app, await upload(app, uploadParts(pdfOf(1000), 'a.pdf', extra)), expected);
  t.is(errors.unknownUploadField('bell\x07').message, 'Unknown field in the upload form', 'a name that does not print as it reads is not echoed');

  // Anthropic's shape: its form has no purpose, and its expiry is expires_in_seconds.
  const anthropicExpiry = "an upload in Anthropic's shape (with anthropic-version) sets its expiry with 'expires_in_seconds'";
  const file: Part = { name: 'file', value: pdfOf(1000), filename: 'a.pdf', contentType: 'application/pdf' };
  for (const [field, instead] of [
    ['expires_after[anchor]', anthropicExpiry],
    ['expires_after[seconds]', anthropicExpiry],
    ['purpose', undefined],
  ] as const) {
    const res = await upload(app, [{ name: field, value: field === 'purpose' ? 'user_data' : '3600' }, file], {
      headers: { 'anthropic-version': '2023-06-01' },
    });
    t.is(res.status, 400);
    const message = errors.unknownUploadField(field, instead).message;
    t.deepEqual(json(res), { type: 'error', error: { type: 'invalid_request_error', message }, request_id: res.headers['request-id'] });
  }
  t.deepEqual(await app.files.list('acct-a', { order: 'asc', limit: 10 }, app.clock.seconds), { files: [], hasMore: false });
});

test('expires_after: both parts or neither, anchor created_at, seconds an integer from 3600 to 2592000', async (t) => {
  const app = await withApp(t);
  const expiry = (anchor?: string, seconds?: string): Part[] => [
    ...(anchor === undefined ? [] : [{ name: 'expires_after[anchor]', value: anchor }]),
    ...(seconds === undefined ? [] : [{ name: 'expires_after[seconds]', value: seconds }]),
  ];
  const invalid: Part[][] = [
    expiry('created_at'),
    expiry(undefined, '3600'),
    expiry('last_active_at', '3600'),
    expiry('created_at', '3599'),
    expiry('created_at', '2592001'),
    expiry('created_at', '3600.5'),
    expiry('created_at', '1e4'),
    expiry('created_at', '-3600'),
    expiry('created_at', ' 3600'),
    expiry('created_at', ''),
    [...expiry('created_at', '3600'), ...expiry(undefined, '7200')],
  ];
  for (const extra of invalid) {
    await isError(t, app, await upload(app, uploadParts(pdfOf(1000), 'a.pdf', extra)), errors.invalidExpiresAfter());
  }
  for (const seconds of [3600, 2_592_000]) {
    const res = await upload(app, uploadParts(pdfOf(1000), 'a.pdf', expiry('created_at', String(seconds))));
    t.is(res.status, 200);
    t.like(json(res), { expires_at: app.clock.seconds + seconds });
  }
});

test('fields beyond the envelope are 413 request_too_large, before the file is read', async (t) => {
  const app = await withApp(t);
  const manyFields = Array.from({ length: 17 }, (_, i): Part => ({ name: `extra${i}`, value: 'x' }));
  await isError(t, app, await upload(app, uploadParts(pdfOf(1000), 'a.pdf', manyFields)), errors.requestTooLarge());
  const bigField: Part = { name: 'note', value: 'x'.repeat(ENVELOPE + 1) };
  await isError(t, app, await upload(app, uploadParts(pdfOf(1000), 'a.pdf', [bigField])), errors.requestTooLarge());
  // A small one within the envelope is read, then refused by name.
  await isError(t, app, await upload(app, uploadParts(pdfOf(1000), 'a.pdf', [{ name: 'note', value: 'kept out' }])), errors.unknownUploadField('note'));
});

test("a part's headers are read up to 16 KiB: what lies beyond is dropped, and a huge header costs no more", async (t) => {
  // Headers are held in memory until the part's body starts: the cap bounds them. A parser whose
  // time grows with the square of a header (formidable's file-name expression) took seconds here.
  t.timeout(20_000);
  const app = await withApp(t, { maxFileBytes: 1_000_000 });
  const send = (fileHeaders: string) => {
    const boundary = 'kmgBoundary';
    const body = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n` +
        `--${boundary}\r\n${fileHeaders}\r\nContent-Type: application/pdf\r\n\r\n%PDF-1.7\n\r\n--${boundary}--\r\n`,
    );
    return rawRequest(`${app.url}/v1/files`, {
      headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body,
    });
  };
  const disposition = 'Content-Disposition: form-data; name="file"; filename="a.pdf"';
  const roomy = await send(`X-Padding: ${'x'.repeat(15 * 1024)}\r\n${disposition}`);
  t.is(roomy.status, 200);
  await app.files.delete('acct-a', (JSON.parse(roomy.body.toString()) as { id: string }).id, app.clock.seconds);
  // The disposition after 16 KiB of padding is never read: the part has none, so it is no file.
  await isError(t, app, await send(`X-Padding: ${'x'.repeat(16 * 1024)}\r\n${disposition}`), errors.missingFile());
  // A 320 KB file name is cut with the rest of the header: what is left is no sane name.
  const huge = await send(`Content-Disposition: form-data; name="file"; filename=${'"filename='.repeat(32_000)}x`);
  await isError(t, app, huge, errors.invalidFileName());
});

test('more than 32 parts in all, file parts under other names included, is 413 request_too_large', async (t) => {
  const app = await withApp(t);
  const ignored = (count: number) => Array.from({ length: count }, (_, i): Part => ({ name: `other${i}`, value: 'y', filename: 'a.pdf' }));
  // purpose and file make 32 with 30 others.
  t.is((await upload(app, uploadParts(pdfOf(1000), 'a.pdf', ignored(30)))).status, 200);
  await app.files.delete('acct-a', (await app.files.list('acct-a', { order: 'asc', limit: 1 }, app.clock.seconds)).files[0]?.id ?? '', app.clock.seconds);
  await isError(t, app, await upload(app, uploadParts(pdfOf(1000), 'a.pdf', ignored(31))), errors.requestTooLarge());
});

test('a malformed multipart body is 400 and leaves nothing behind', async (t) => {
  const app = await withApp(t);
  const { body, contentType } = multipart(uploadParts(pdfOf(1000)));
  const truncated = body.subarray(0, body.length - 10);
  const res = await rawRequest(`${app.url}/v1/files`, {
    headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': contentType },
    body: truncated,
  });
  await isError(t, app, res, errors.invalidRequest('The multipart body could not be parsed'));
});

test('a body that ends inside a file part under another name is 400, with Content-Length and chunked', async (t) => {
  // The skipped part's own error ("Part terminated early") once went unhandled and ended the process.
  const app = await withApp(t);
  const body = Buffer.from('--b\r\nContent-Disposition: form-data; name="other"; filename="x.pdf"\r\n\r\n%PDF-abc');
  for (const chunked of [false, true]) {
    const res = await rawRequest(`${app.url}/v1/files`, {
      headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': 'multipart/form-data; boundary=b' },
      body,
      chunked,
    });
    await isError(t, app, res, errors.invalidRequest('The multipart body could not be parsed'));
  }
});

/**
 * The descriptors this process holds on files under `dir` (deleted ones included): the server runs
 * in it, and only an upload opens files there, so other test files running beside it change nothing.
 */
function descriptorsUnder(dir: string): string[] {
  const targets = readdirSync('/proc/self/fd').map((fd) => {
    try {
      return readlinkSync(join('/proc/self/fd', fd));
    } catch {
      return ''; // closed since it was listed
    }
  });
  return targets.filter((target) => target.startsWith(`${dir}/`));
}

test('a Content-Length shorter than the body leaves no temp file and no descriptor open on one, however often', async (t) => {
  // Node's parser reads the bytes beyond the Content-Length as a second request, refuses it and
  // drops the connection while the upload still holds its file part: its body never ends.
  t.timeout(30_000);
  const app = await withApp(t, { maxFileBytes: 1_000_000 });
  const { body, contentType } = multipart(uploadParts(pdfOf(300_000)));
  const head = `POST /v1/files HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${app.keys.a}\r\nContent-Type: ${contentType}\r\nContent-Length: 150000\r\n\r\n`;
  const send = () => rawExchange(app.url, head, [body]);
  await send();
  await app.idle();
  const tracked = existsSync('/proc/self/fd');
  for (let attempt = 0; attempt < 20; attempt++) {
    await send();
    await app.idle();
    t.deepEqual(await app.tempFiles(), [], `attempt ${attempt}`);
    if (tracked) t.deepEqual(descriptorsUnder(app.tempDir), [], `attempt ${attempt}`);
  }
  t.deepEqual(await app.files.list('acct-a', { order: 'asc', limit: 10 }, app.clock.seconds), { files: [], hasMore: false });
});

test('a part that is not form-data, with more than 16 KiB, is answered 400 rather than left hanging', async (t) => {
  // @fastify/busboy skips such a part and then never finishes a body it closes in the same chunk;
  // the whole body has arrived, so no request timeout would ever end it.
  const app = await withApp(t);
  const { body: upload, contentType } = multipart(uploadParts(pdfOf(1000)));
  const boundary = contentType.slice(contentType.indexOf('boundary=') + 'boundary='.length);
  const closing = Buffer.from(`--${boundary}--\r\n`);
  const parts = upload.subarray(0, upload.length - closing.length);
  for (const headers of ['X-Note: no disposition', 'Content-Disposition: attachment; name="file"']) {
    const body = Buffer.concat([parts, Buffer.from(`--${boundary}\r\n${headers}\r\n\r\n`), Buffer.alloc(20_000, 0x41), Buffer.from('\r\n'), closing]);
    const res = await rawRequest(`${app.url}/v1/files`, { headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': contentType }, body });
    await isError(t, app, res, errors.invalidRequest('The multipart body could not be parsed'));
  }
});

test('a disk that fails while the file is written is a 500 with no detail, reported, the connection closed', async (t) => {
  const app = await withApp(t);
  // The temp dir gone: the temp file cannot be created.
  await rm(app.tempDir, { recursive: true });
  const res = await upload(app, uploadParts(pdfOf(1000)));
  await mkdir(app.tempDir);
  t.is(res.status, 500);
  t.deepEqual(json(res), { error: { message: 'Internal server error', type: 'server_error', param: null, code: 'internal_error' } });
  t.is(res.headers.connection, 'close');
  t.deepEqual(await app.tempFiles(), []);
  t.deepEqual(
    app.serverErrors.map((err) => (err as { code?: unknown }).code),
    ['ENOENT'],
  );
});

test('a client that aborts mid-upload leaves the temp dir and the blob store as they were', async (t) => {
  const app = await withApp(t);
  const before = await upload(app, uploadParts(pdfOf(1000)));
  t.is(before.status, 200);
  const blobsBefore: string[] = [];
  for await (const blob of app.blobs.list()) blobsBefore.push(blob.id);

  await abortUploadMidway(app, pdfOf(LIMIT));

  t.deepEqual(await app.tempFiles(), []);
  const blobsAfter: string[] = [];
  for await (const blob of app.blobs.list()) blobsAfter.push(blob.id);
  t.deepEqual(blobsAfter, blobsBefore);
  t.is((await app.files.usage('acct-a', app.clock.seconds)).files, 1);
  t.deepEqual(
    app.serverErrors.filter((err) => !droppedConnection(err)),
    [],
    'a client abort is not a server error',
  );
});

test('bad options are refused when the middleware is made', (t) => {
  t.throws(() => pdfUpload({ maxFileBytes: 0 }), { instanceOf: TypeError, message: /maxFileBytes/ });
  t.throws(() => pdfUpload({ maxFileBytes: 1.5 }), { instanceOf: TypeError });
  t.throws(() => pdfUpload({ tempDir: '' }), { instanceOf: TypeError, message: /tempDir/ });
});

// api.md's own number, with the default limits: the other tests use a small limit to stay fast.
const MAX = 26_214_400;

for (const chunked of [false, true]) {
  const how = chunked ? 'chunked, without Content-Length' : 'with Content-Length';
  test(`a PDF of exactly 26,214,400 bytes is accepted and 26,214,401 refused with 413, ${how}`, async (t) => {
    const app = await filesApp();
    t.teardown(() => app.close());
    const send = (bytes: number) => {
      const { body, contentType } = multipart(uploadParts(pdfOf(bytes)));
      return rawRequest(`${app.url}/v1/files`, { headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': contentType }, body, chunked });
    };
    const accepted = await send(MAX);
    t.is(accepted.status, 200);
    t.like(JSON.parse(accepted.body.toString()), { bytes: MAX });
    const refused = await send(MAX + 1);
    t.is(refused.status, 413);
    t.deepEqual(JSON.parse(refused.body.toString()), {
      error: { message: 'File is too large', type: 'invalid_request_error', param: null, code: 'file_too_large' },
    });
    t.is(refused.headers.connection, 'close');
    t.deepEqual(await app.tempFiles(), []);
    t.is((await app.files.usage('acct-a', app.clock.seconds)).files, 1);
  });
}
