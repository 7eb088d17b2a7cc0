import test, { type ExecutionContext } from 'ava';
import OpenAI, { APIError, toFile } from 'openai';
import { filesApp, type FilesApp } from '../helpers/files-app.js';
import { pdfOf } from '../helpers/multipart.js';

const LIMIT = 100_000;

async function setup(t: ExecutionContext): Promise<{ app: FilesApp; client: (key: string) => OpenAI }> {
  const app = await filesApp({ limits: { maxFileBytes: LIMIT } });
  t.teardown(() => app.close());
  return { app, client: (key) => new OpenAI({ apiKey: key, baseURL: `${app.url}/v1`, maxRetries: 0 }) };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any constructor of an APIError subclass
type ErrorClass = new (...args: any[]) => APIError;

const pdfFile = (bytes: number, name = 'report.pdf') => toFile(pdfOf(bytes), name, { type: 'application/pdf' });

test('the openai SDK uploads with expires_after, retrieves, downloads the same bytes and deletes', async (t) => {
  const { app, client } = await setup(t);
  const openai = client(app.keys.a);
  const pdf = pdfOf(5000, 0x42);
  const created = await openai.files.create({
    file: await toFile(pdf, 'sdk.pdf', { type: 'application/pdf' }),
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
  const { app, client } = await setup(t);
  const openai = client(app.keys.a);
  const ids: string[] = [];
  for (let i = 0; i < 7; i++) {
    ids.push((await openai.files.create({ file: await pdfFile(100 + i, `f${i}.pdf`), purpose: 'user_data' })).id);
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
  t.deepEqual(firstPage.data.map((file) => file.id), asc.slice(0, 3));
  t.true(firstPage.has_more);
});

test('the openai SDK raises its error classes with our codes for 400, 401, 403, 404 and 413', async (t) => {
  const { app, client } = await setup(t);
  const openai = client(app.keys.a);
  const expectError = async (call: Promise<unknown>, errorClass: ErrorClass, status: number, code: string) => {
    const err = await t.throwsAsync<APIError>(call, { instanceOf: errorClass });
    t.is(err?.constructor, errorClass);
    t.is(err?.status, status, code);
    t.is(err?.code, code);
    t.is(err?.type, status === 401 ? 'authentication_error' : status === 403 ? 'permission_error' : 'invalid_request_error');
    t.regex(err?.requestID ?? '', /^req_[A-Za-z0-9]{32}$/);
  };
  await expectError(openai.files.retrieve('file-nope'), OpenAI.BadRequestError, 400, 'invalid_file_id');
  await expectError(
    openai.files.create({ file: await toFile(Buffer.from('hello'), 'hello.pdf'), purpose: 'user_data' }),
    OpenAI.BadRequestError,
    400,
    'invalid_file_format',
  );
  await expectError(
    openai.files.create({ file: await pdfFile(100), purpose: 'user_data', expires_after: { anchor: 'created_at', seconds: 60 } }),
    OpenAI.BadRequestError,
    400,
    'invalid_expires_after',
  );
  await expectError(client('kmg_sk_not-a-key').files.list(), OpenAI.AuthenticationError, 401, 'invalid_api_key');
  await expectError(
    client(app.keys.readOnly).files.create({ file: await pdfFile(100), purpose: 'user_data' }),
    OpenAI.PermissionDeniedError,
    403,
    'forbidden',
  );
  await expectError(openai.files.retrieve('file-000000aaaaaaaaaaaaaaaaaaaaaaaaaa'), OpenAI.NotFoundError, 404, 'file_not_found');
  // 413 has no subclass in the SDK: a plain APIError.
  await expectError(openai.files.create({ file: await pdfFile(LIMIT + 1), purpose: 'user_data' }), APIError, 413, 'file_too_large');
  t.deepEqual(await app.tempFiles(), []);
});
