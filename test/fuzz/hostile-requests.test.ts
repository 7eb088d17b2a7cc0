// Property-based fuzzing of what a hostile client can send: multipart bodies to pdfUpload() in a
// Koa app, and raw HTTP requests to the reference server. Whatever arrives: no crash, no 5xx, no
// exchange still open 10 s after the client has sent all it will, no temp file left, no file
// created from invalid input. A fixed seed and a few runs in `npm test`; FUZZ_RUNS=N runs N cases
// of each with a new seed (FUZZ_SEED to replay one) and prints the tally: docs/FUZZING.md.
import { dirname } from 'node:path';
import { fc, testProp } from '@fast-check/ava';
import test, { type ExecutionContext } from 'ava';
import { droppedConnection, filesApp, type FilesApp } from '../helpers/files-app.js';
import { pdfOf } from '../helpers/multipart.js';
import { rawExchange, type RawExchange } from '../helpers/raw-request.js';
import { uploadFiles } from '../helpers/server-process.js';
import { referenceApp, type ReferenceApp } from '../helpers/reference-app.js';

const LONG_RUNS = Number(process.env.FUZZ_RUNS ?? 0);
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
// Every case leaves its mark on the one server of its property: a failure is reported as found,
// not shrunk (a smaller case would fail only because an earlier one broke the server).
const params = (runs: number) => ({
  endOnFailure: true,
  ...(LONG_RUNS > 0 ? { numRuns: LONG_RUNS, ...(SEED === undefined ? {} : { seed: SEED }) } : { numRuns: runs, seed: 20_260_514 }),
});
const HANG_MS = 10_000;
const MAX_FILE_BYTES = 150_000;
const CRLF = '\r\n';

let uploads: FilesApp;
let server: ReferenceApp;
const keys = { full: '', readOnly: '' };
test.before(async () => {
  uploads = await filesApp({ limits: { maxFileBytes: MAX_FILE_BYTES } });
  server = await referenceApp();
  keys.full = await server.keyFor();
  keys.readOnly = await server.keyFor(['files:read']);
});

const tally = { requests: 0, answered: 0, status5xx: 0, hangs: 0, resets: 0, created: 0, tempFilesLeft: 0, filesFromInvalidInput: 0 };
test.after.always(async () => {
  if (LONG_RUNS > 0) console.log(`fuzz tally: ${JSON.stringify(tally)}`);
  await uploads?.close();
  await server?.close();
});

/** What `promise` resolves to, or 'hang' when it has not within 10 s. */
async function within<T>(promise: Promise<T>): Promise<T | 'hang'> {
  let timer: NodeJS.Timeout | undefined;
  const result = await Promise.race([promise, new Promise<'hang'>((resolve) => (timer = setTimeout(() => resolve('hang'), HANG_MS)))]);
  clearTimeout(timer);
  if (result === 'hang') tally.hangs += 1;
  return result;
}

/** The exchange, or 'hang' when it is still open 10 s after the client sent all it will. */
async function exchange(url: string, head: string, body: Buffer[], abort: boolean): Promise<RawExchange | 'hang'> {
  tally.requests += 1;
  const result = await within(rawExchange(url, head, body, { abort }));
  if (result !== 'hang' && result.reset) tally.resets += 1;
  return result;
}

/** Fails unless the server has finished every request within 10 s (a handler that never ends holds its upload). */
async function settled(t: ExecutionContext, idle: Promise<void>): Promise<void> {
  if ((await within(idle)) === 'hang') t.fail('a request is still being handled 10 s later');
}

interface Answer {
  status: number;
  headers: string;
}

/** The responses in what the server sent: status and header block of each (bodies are JSON, never a raw CRLF + status line). */
function answers(text: string): Answer[] {
  return [...text.matchAll(/(?:^|\r\n)HTTP\/1\.[01] (\d{3})[^\r\n]*\r\n((?:[^\r\n]+\r\n)*)\r\n/g)].map((match) => ({
    status: Number(match[1]),
    headers: match[2] ?? '',
  }));
}

/** Every answer below 500, each final one with its request id (unless Node answered alone); returns them. */
function checkAnswers(t: ExecutionContext, result: RawExchange | 'hang', requestIds = true): Answer[] {
  if (result === 'hang') {
    t.fail('the exchange hung');
    return [];
  }
  const found = answers(result.answer);
  if (found.length > 0) tally.answered += 1;
  for (const { status, headers } of found) {
    if (status >= 500) tally.status5xx += 1;
    t.true(status < 500, `status ${status}`);
    if (status >= 200 && requestIds) t.regex(headers, /^(x-)?request-id: req_[A-Za-z0-9]{32}\r$/im);
  }
  return found;
}

// --- Multipart bodies -------------------------------------------------------------------------

interface Part {
  headers: string[];
  data: Buffer;
}

/** How a mutation bears on the outcome: it makes the upload invalid, may or may not, or leaves it valid. */
type Effect = 'breaks' | 'maybe' | 'keeps';

interface Form {
  boundary: string;
  parts: Part[];
  /** Bytes before the first boundary and after the last (RFC 2046 allows both). */
  preamble: Buffer;
  epilogue: Buffer;
  /** Where the body ends early: inside the data of one part (its index modulo their number), at a fraction of it. */
  cut: { part: number; at: number } | null;
  /** The boundary the Content-Type names. */
  declaredBoundary: string;
  effects: Effect[];
}

const disposition = (name: string, filename?: string) =>
  `Content-Disposition: form-data; name="${name}"${filename === undefined ? '' : `; filename="${filename}"`}`;
const field = (name: string, value: string): Part => ({ headers: [disposition(name)], data: Buffer.from(value) });
const filePart = (filename: string, data: Buffer): Part => ({ headers: [disposition('file', filename), 'Content-Type: application/pdf'], data });

function serialize(form: Form): Buffer {
  const chunks = [form.preamble];
  const cutPart = form.cut === null || form.parts.length === 0 ? -1 : form.cut.part % form.parts.length;
  for (const [index, { headers, data }] of form.parts.entries()) {
    chunks.push(Buffer.from(`--${form.boundary}${CRLF}${headers.join(CRLF)}${CRLF}${CRLF}`));
    if (index === cutPart) return Buffer.concat([...chunks, data.subarray(0, Math.floor(data.length * (form.cut?.at ?? 0)))]);
    chunks.push(data, Buffer.from(CRLF));
  }
  return Buffer.concat([...chunks, Buffer.from(`--${form.boundary}--${CRLF}`), form.epilogue]);
}

const SANE_NAMES = ['report.pdf', 'Q3 report.pdf', 'résumé 履歴書.pdf', '../../etc/passwd.pdf', "it's; a=%22b%22.pdf"];
const BAD_NAMES = ['report.PDF', 'report.txt', '', 'dir/', 'invoice\u202Efdp.exe.pdf', 'zero\u200Bwidth.pdf', 'bell\u0007.pdf', `${'a'.repeat(300)}.pdf`];
const size = fc.oneof({ weight: 5, arbitrary: fc.integer({ min: 5, max: 3000 }) }, { weight: 1, arbitrary: fc.integer({ min: 3000, max: MAX_FILE_BYTES }) });
const bytes = (max: number) => fc.uint8Array({ maxLength: max }).map((array) => Buffer.from(array));

type Mutation = (form: Form) => Effect;
const noise = fc.record({
  headers: fc.constantFrom(
    ['X-Note: none'],
    ['Content-Disposition: attachment; name="file"'],
    [disposition('other', 'x.pdf')],
    [disposition('other', 'y.pdf')],
    [disposition('note')],
    [`X-Pad: ${'p'.repeat(17 * 1024)}`, disposition('pad')],
    ['content-disposition:form-data;name="misc"'],
  ),
  data: fc.oneof(
    bytes(64),
    fc.integer({ min: 16 * 1024, max: 40 * 1024 }).map((length) => Buffer.alloc(length, 0x41)),
  ),
  at: fc.nat(),
});
const cutShort: fc.Arbitrary<Mutation> = fc
  .record({ part: fc.nat(), at: fc.double({ min: 0, max: 0.999, noNaN: true }) })
  .map((cut) => (form) => ((form.cut = cut), 'breaks'));
const mutations: fc.Arbitrary<Mutation>[] = [
  fc.constant((form) => ((form.parts = form.parts.filter((part) => !part.headers[0]?.includes('"purpose"'))), 'breaks')),
  fc.constantFrom('assistants', 'USER_DATA', '', 'user_data ').map((value) => (form) => (form.parts.push(field('purpose', value)), 'breaks')),
  fc.constantFrom(...BAD_NAMES).map((name) => (form) => {
    for (const part of form.parts) if (part.headers[0]?.includes('name="file"')) part.headers[0] = disposition('file', name);
    return 'breaks';
  }),
  size.map((length) => (form) => {
    for (const part of form.parts) if (part.headers[0]?.includes('name="file"')) part.data = Buffer.alloc(length, 0x20);
    return 'breaks';
  }),
  size.map((length) => (form) => (form.parts.push(filePart('second.pdf', pdfOf(length))), 'breaks')),
  fc.integer({ min: MAX_FILE_BYTES + 1, max: MAX_FILE_BYTES + 70_000 }).map((length) => (form) => {
    for (const part of form.parts) if (part.headers[0]?.includes('name="file"')) part.data = pdfOf(length);
    return 'breaks';
  }),
  fc.constant((form) => ((form.declaredBoundary = `${form.boundary}x`), 'breaks')),
  fc
    .record({ anchor: fc.constantFrom('created_at', 'last_active_at'), seconds: fc.constantFrom('3600', '2592000', '3599', '1e4', '') })
    .map(({ anchor, seconds }) => (form) => {
      const twice = form.parts.some((part) => part.headers[0]?.includes('expires_after'));
      form.parts.push(field('expires_after[anchor]', anchor), field('expires_after[seconds]', seconds));
      return !twice && anchor === 'created_at' && (seconds === '3600' || seconds === '2592000') ? 'keeps' : 'breaks';
    }),
  // Parts that are no form-data (skipped), others' file parts, odd headers: valid or not, never a 5xx.
  noise.map(
    ({ headers, data, at }) =>
      (form) => (form.parts.splice(at % (form.parts.length + 1), 0, { headers: [...headers], data }), 'maybe'),
  ),
  noise.map(({ headers, data, at }) => (form) => {
    const index = at % (form.parts.length + 1);
    form.parts.splice(index, 0, { headers: [...headers], data });
    form.cut = { part: index, at: 0.5 };
    return 'breaks';
  }),
  // The body ends early, anywhere.
  cutShort,
  // A preamble ends in CRLF, or the first delimiter is none and the first part joins the preamble.
  fc.tuple(bytes(200), bytes(200)).map(
    ([preamble, epilogue]) =>
      (form) => ((form.preamble = Buffer.concat([preamble, Buffer.from(CRLF)])), (form.epilogue = epilogue), 'maybe'),
  ),
];

/** A valid upload (in random order, of random size and name), then up to three mutations. */
const formArb = (pdfContent: boolean) =>
  fc
    .record({
      boundary: fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 12, maxLength: 12 }),
      name: fc.constantFrom(...SANE_NAMES),
      length: size,
      purposeFirst: fc.boolean(),
      mutate: fc.array(fc.oneof(...mutations), { maxLength: 3 }),
    })
    .map(({ boundary: random, name, length, purposeFirst, mutate }) => {
      const boundary = `----fuzz${random}`;
      const file = filePart(name, pdfContent ? pdfOf(length) : Buffer.alloc(length, 0x20));
      const purpose = field('purpose', 'user_data');
      const form: Form = {
        boundary,
        declaredBoundary: boundary,
        parts: purposeFirst ? [purpose, file] : [file, purpose],
        preamble: Buffer.alloc(0),
        epilogue: Buffer.alloc(0),
        cut: null,
        effects: [],
      };
      form.effects = mutate.map((mutation) => mutation(form));
      // A counterexample as a reader wants it: the parts' headers and sizes, not their bytes.
      return Object.assign(form, {
        [fc.toStringMethod]: () =>
          JSON.stringify({
            ...form,
            parts: form.parts.map((part) => ({
              headers: part.headers.map((header) => header.slice(0, 120)),
              bytes: part.data.length,
              pdf: part.data.subarray(0, 5).toString('latin1') === '%PDF-',
            })),
            preamble: form.preamble.length,
            epilogue: form.epilogue.length,
          }),
      });
    });

/** Body bytes in chunks of random sizes, written as chunked framing. */
function chunked(body: Buffer, sizes: number[]): Buffer[] {
  const out: Buffer[] = [];
  for (let offset = 0, index = 0; offset < body.length; index += 1) {
    const length = Math.max(1, sizes[index % sizes.length] ?? 1);
    const slice = body.subarray(offset, offset + length);
    out.push(Buffer.from(`${slice.length.toString(16)}${CRLF}`), slice, Buffer.from(CRLF));
    offset += slice.length;
  }
  out.push(Buffer.from(`0${CRLF}${CRLF}`));
  return out;
}

/** Removes the files account a holds; returns their names. */
async function removeFiles(): Promise<string[]> {
  const { files } = await uploads.files.list('acct-a', { order: 'asc', limit: 100 }, uploads.clock.seconds);
  for (const file of files) await uploads.files.delete('acct-a', file.id, uploads.clock.seconds);
  return files.map((file) => file.filename);
}

testProp(
  'pdfUpload: any multipart body is answered below 500, leaves no temp file and creates a file only when valid',
  [
    formArb(true),
    fc.constantFrom('length', 'length', 'chunked', 'short', 'abort'),
    fc.array(fc.integer({ min: 1, max: 70_000 }), { minLength: 1, maxLength: 4 }),
    fc.integer({ min: 3, max: 5000 }),
  ],
  async (t, form, framing, chunkSizes, shortBy) => {
    // A failed assertion ends the run: what it created goes before the next one.
    await removeFiles();
    const body = serialize(form);
    const headers = [
      `POST /v1/files HTTP/1.1`,
      'Host: gateway',
      `Authorization: Bearer ${uploads.keys.a}`,
      `Content-Type: multipart/form-data; boundary=${form.declaredBoundary}`,
      'Connection: close',
    ];
    if (framing === 'chunked') headers.push('Transfer-Encoding: chunked');
    // Short: the bytes beyond the declared length make a second request, which Node refuses.
    else headers.push(`Content-Length: ${framing === 'short' ? Math.max(0, body.length - shortBy) : body.length}`);
    const abort = framing === 'abort';
    const sent = framing === 'chunked' ? chunked(body, chunkSizes) : [abort ? body.subarray(0, body.length >> 1) : body];
    const result = await exchange(uploads.url, `${headers.join(CRLF)}${CRLF}${CRLF}`, sent, abort);
    // Node answers the second request of a short length itself, bodiless: this app is plain Koa.
    const found = abort ? [] : checkAnswers(t, result, framing !== 'short');

    // A short length that cuts no more than the epilogue and the last CRLF leaves a whole form.
    const cutsForm = framing === 'short' && shortBy > form.epilogue.length + CRLF.length;
    const outcome = cutsForm || form.effects.includes('breaks') ? 'refused' : framing === 'short' || form.effects.includes('maybe') ? 'any' : 'created';
    const final = found.find((answer) => answer.status >= 200);
    if (!abort && framing !== 'short') t.truthy(final, 'a well-framed upload is answered');
    if (final && outcome === 'created') t.is(final.status, 200);
    if (final && outcome === 'refused') t.true(final.status >= 400, `refused, not ${final.status}`);

    await settled(t, uploads.idle());
    const left = await uploads.tempFiles();
    tally.tempFilesLeft += left.length;
    t.deepEqual(left, []);
    t.deepEqual(
      uploads.serverErrors.splice(0).filter((err) => !droppedConnection(err)),
      [],
    );
    const files = await removeFiles();
    tally.created += files.length;
    if (outcome === 'refused' || abort) {
      tally.filesFromInvalidInput += files.length;
      t.deepEqual(files, [], 'no file from invalid input');
    }
  },
  params(40),
);

// --- Raw HTTP ---------------------------------------------------------------------------------

const tricky = fc.constantFrom(
  'Expect: 100-continue',
  'Upgrade: websocket',
  'Connection: keep-alive',
  'Host: another',
  'X-Request-Id: req_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
  'anthropic-version: 2023-06-01',
  'Content-Encoding: gzip',
  'Authorization: Basic YTpi',
  'Authorization: Bearer ',
  'x-api-key:   ',
  `X-Folded: a${CRLF} b`,
  'Bad Header: x',
  'X-Nul: a\u0000b',
  ': no-name',
  `X-Long: ${'l'.repeat(17 * 1024)}`,
);
const randomHeader = fc
  .tuple(fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 16 }), fc.string({ unit: 'binary-ascii', maxLength: 40 }))
  .map(([name, value]) => `${name}: ${value}`);

const requestArb = fc.record({
  method: fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom('GET', 'POST', 'POST', 'DELETE', 'HEAD', 'OPTIONS', 'PUT') },
    { weight: 1, arbitrary: fc.constantFrom('CONNECT', 'PATCH', 'TRACE', 'PRI', 'M-SEARCH') },
    { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 8 }) },
  ),
  target: fc.oneof(
    {
      weight: 6,
      arbitrary: fc.constantFrom(
        '/v1/files',
        '/v1/files/file-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
        '/v1/files/file-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/content',
        '/v1/files?limit=0&order=up',
        '/v1/models',
        '/v1/chat/completions',
        '/v1/messages',
        '/healthz',
        '/readyz',
      ),
    },
    { weight: 2, arbitrary: fc.constantFrom('*', 'example.com:443', 'http://gateway/v1/files', '/%00', '/v1/files/../../etc', '//v1/files', '/V1/FILES/', '') },
    { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 40 }) },
  ),
  version: fc.oneof(
    { weight: 8, arbitrary: fc.constant('HTTP/1.1') },
    { weight: 2, arbitrary: fc.constantFrom('HTTP/1.0', 'HTTP/2.0', 'HTTP/0.9', 'http/1.1', '') },
  ),
  key: fc.constantFrom('full', 'full', 'readOnly', 'wrong', 'none'),
  keyHeader: fc.constantFrom('Authorization: Bearer ', 'x-api-key: '),
  contentType: fc.constantFrom(
    'multipart',
    'multipart',
    'multipart/form-data',
    'application/json',
    'text/plain',
    'multipart/form-data; boundary=',
    'multipart/mixed; boundary=x',
    null,
  ),
  headers: fc.array(fc.oneof(tricky, randomHeader), { maxLength: 5 }),
  body: fc.oneof(
    { weight: 3, arbitrary: formArb(false).map((form) => ({ bytes: serialize(form), boundary: form.declaredBoundary })) },
    { weight: 2, arbitrary: bytes(3000).map((data) => ({ bytes: data, boundary: 'b' })) },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(
          '{"model":"echo-1","messages":[{"role":"user","content":"hi"}]}',
          '{"model":"echo-1","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stream":true}',
          '{"model":',
          '[]',
          '',
        )
        .map((text) => ({ bytes: Buffer.from(text), boundary: 'b' })),
    },
  ),
  framing: fc.constantFrom('none', 'length', 'length', 'short', 'long', 'bad-length', 'chunked', 'chunked', 'bad-chunked', 'unterminated', 'both', 'te-gzip'),
  badLength: fc.constantFrom('abc', '-1', '1.5', '99999999999999999999999', '5, 6', '0x10', ''),
  chunkSizes: fc.array(fc.integer({ min: 1, max: 4000 }), { minLength: 1, maxLength: 4 }),
  shortBy: fc.integer({ min: 1, max: 500 }),
  newline: fc.constantFrom(CRLF, CRLF, CRLF, '\n'),
  giveUp: fc.oneof({ weight: 6, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
});
type RawCase = typeof requestArb extends fc.Arbitrary<infer T> ? T : never;

/** The request's head and body as sent, and whether the client gives up (drops the connection) once it has written them. */
function rawRequest(c: RawCase): { head: string; body: Buffer[]; abort: boolean } {
  const lines = [`${c.method} ${c.target} ${c.version}`.trimEnd(), 'Host: gateway'];
  if (c.key !== 'none') lines.push(`${c.keyHeader}${c.key === 'wrong' ? 'kmg_sk_wrong' : keys[c.key]}`);
  if (c.contentType !== null) lines.push(`Content-Type: ${c.contentType === 'multipart' ? `multipart/form-data; boundary=${c.body.boundary}` : c.contentType}`);
  lines.push(...c.headers);
  const body = c.body.bytes;
  let sent = [body];
  // A body the server still waits for when the client stops: the client gives up.
  let waitsForMore = false;
  switch (c.framing) {
    case 'none':
      sent = [];
      break;
    case 'length':
    case 'short':
      lines.push(`Content-Length: ${c.framing === 'short' ? Math.max(0, body.length - c.shortBy) : body.length}`);
      break;
    case 'long':
      lines.push(`Content-Length: ${body.length + c.shortBy}`);
      waitsForMore = true;
      break;
    case 'bad-length':
      lines.push(`Content-Length: ${c.badLength}`);
      break;
    case 'chunked':
    case 'unterminated':
      lines.push('Transfer-Encoding: chunked');
      sent = chunked(body, c.chunkSizes);
      if (c.framing === 'unterminated') {
        sent.pop();
        waitsForMore = true;
      }
      break;
    case 'bad-chunked':
      lines.push('Transfer-Encoding: chunked');
      sent = [Buffer.from(`zz;${c.badLength}${CRLF}`), body, Buffer.from(`${CRLF}0${CRLF}${CRLF}`)];
      break;
    case 'both':
      lines.push(`Content-Length: ${body.length}`, 'Transfer-Encoding: chunked');
      sent = chunked(body, c.chunkSizes);
      break;
    case 'te-gzip':
      lines.push('Transfer-Encoding: gzip');
      break;
  }
  // The server closes once it has answered (HTTP/1.0 and refused requests do anyway).
  lines.push('Connection: close');
  return { head: `${lines.join(c.newline)}${c.newline}${c.newline}`, body: sent, abort: waitsForMore || c.giveUp };
}

testProp(
  'reference server: any request is answered below 500 with a request id, or closed; nothing is left behind or created',
  [requestArb],
  async (t, c) => {
    const { head, body, abort } = rawRequest(c);
    const result = await exchange(server.url, head, body, abort);
    if (!abort) checkAnswers(t, result);
    await settled(t, server.idle());
    const left = await uploadFiles(dirname(server.config.uploadsDir));
    tally.tempFilesLeft += left.length;
    t.deepEqual(left, []);
    const { files } = await server.deployment.files.list('acme', { order: 'asc', limit: 10 }, Date.now() / 1000);
    tally.filesFromInvalidInput += files.length;
    t.deepEqual(files, [], 'no file from a body that holds no PDF');
    t.deepEqual(
      server.logs.filter((line) => line.level >= 50),
      [],
      'no error in the log',
    );
  },
  params(120),
);
