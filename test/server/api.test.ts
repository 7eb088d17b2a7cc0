import test, { type ExecutionContext } from 'ava';
import { rawExchange } from '../helpers/raw-request.js';
import { serverApiSuite } from '../helpers/server-api-suite.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { tempDataDir } from '../helpers/server-process.js';
import { REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';
import { referenceApp } from '../helpers/reference-app.js';

// The reference server's API as clients use it, on each deployment; and the answers to requests
// that are not HTTP enough for the API to see them.

// Awaited before the first test or hook: AVA refuses any declared after a top-level await that follows one.
const app = await referenceApp();
test.after.always(() => app.close());

// The embedded default: SQLite file, in-memory limits and files on disk, all under DATA_DIR.
serverApiSuite(test, 'embedded', async () => {
  const data = await tempDataDir();
  return { env: { DATA_DIR: data.dir }, cleanup: data.remove };
});

// PostgreSQL (a database of its own) and Redis, files on disk.
serverApiSuite(withRedis(withPostgres(test)), 'postgres+redis', async () => {
  const [data, database] = await Promise.all([tempDataDir(), throwawayPostgres()]);
  return {
    env: { DATA_DIR: data.dir, DATABASE_URL: database.url, REDIS_URL },
    async cleanup() {
      await database.drop();
      await data.remove();
    },
  };
});

// Protocol errors: what Node's HTTP parser refuses, answered in Shape A by the reference server's app.

const REQUEST_ID = /^x-request-id: (req_[A-Za-z0-9]{32})$/im;

/** The answer's status, headers (lower-cased names) and JSON body; the text after it, if any. */
function parse(answer: string) {
  const [head = '', ...rest] = answer.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(rest.join('\r\n\r\n')) as unknown };
}

const shapeA = (message: string, code: string) => ({ error: { message, type: 'invalid_request_error', param: null, code } });

/** Sends `request` raw, expects one Shape A answer with a request id that the log names, and a clean close. */
async function refused(t: ExecutionContext, request: string | string[], status: number, body: unknown) {
  const { answer, reset } = await rawExchange(app.url, '', typeof request === 'string' ? [request] : request);
  t.false(reset, 'the connection ends cleanly');
  const parsed = parse(answer);
  t.is(parsed.status, status);
  t.deepEqual(parsed.body, body);
  t.is(parsed.headers.connection, 'close');
  t.is(parsed.headers['x-content-type-options'], 'nosniff');
  const requestId = REQUEST_ID.exec(answer)?.[1];
  t.truthy(requestId);
  t.like(await app.logLine((line) => line.requestId === requestId), { msg: 'protocol error', status });
}

const malformed = shapeA('Malformed HTTP request', 'invalid_request');

test('a request Node cannot parse is a Shape A 400 with a request id, logged', async (t) => {
  await refused(t, 'NOT-HTTP\r\n\r\n', 400, malformed);
  await refused(t, 'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n', 400, malformed);
  // Framing: both lengths, or a chunk size that is no number.
  await refused(t, 'POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n', 400, malformed);
  await refused(t, 'POST /v1/files HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n', 400, malformed);
});

test('headers over 16 KiB are a Shape A 431, read to their end first', async (t) => {
  const padding = Array.from({ length: 64 }, () => `X-Padding: ${'a'.repeat(16 * 1024)}\r\n`);
  await refused(t, ['GET /v1/models HTTP/1.1\r\nHost: x\r\n', ...padding, '\r\n'], 431, shapeA('Request headers are too large', 'request_headers_too_large'));
});

test('CONNECT is answered in Shape A rather than closed unanswered', async (t) => {
  await refused(
    t,
    'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n',
    400,
    shapeA('CONNECT is not supported: this server is no proxy', 'invalid_request'),
  );
});

test('a malformed request after a good one on the same connection: the good one is answered, then the 400', async (t) => {
  const { answer, reset } = await rawExchange(app.url, '', ['GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nNOT-HTTP\r\n\r\n']);
  t.false(reset);
  const second = answer.indexOf('HTTP/1.1 400 ');
  t.regex(answer.slice(0, second), /^HTTP\/1\.1 200 /);
  t.deepEqual(parse(answer.slice(second)).body, malformed);
});
