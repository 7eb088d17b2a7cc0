import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import type { TestFn } from 'ava';
import OpenAI, { toFile } from 'openai';
import { makePdf } from './models-pdf.js';
import { uploadForm } from './multipart.js';
import { OPENAPI_DOCUMENT, checkedFetch } from './openapi.js';
import { until } from './poll.js';
import { createKey, minuteAlignedClock, startServer, tempDataDir, type CreatedKey, type RunningServer } from './server-process.js';

/** How a deployment is brought up for the suite: the server's environment, and how to clean up. */
export interface SuiteDeployment {
  env: Record<string, string>;
  cleanup(): Promise<void>;
}

export type KeyStyle = 'bearer' | 'x-api-key';
export const KEY_STYLES: readonly KeyStyle[] = ['bearer', 'x-api-key'];

const REQUEST_ID = /^req_[A-Za-z0-9]{32}$/;

interface Keys {
  all: CreatedKey;
  readOnly: CreatedKey;
  echoOneOnly: CreatedKey;
  /** Every scope, on an account of its own: its file list holds only what its test made. */
  otherAccount: CreatedKey;
}

interface Context {
  server: RunningServer;
  deployment: SuiteDeployment;
  keys: Keys;
}

function authHeaders(key: string | undefined, style: KeyStyle = 'bearer'): Record<string, string> {
  if (key === undefined) return {};
  return style === 'bearer' ? { authorization: `Bearer ${key}` } : { 'x-api-key': key };
}

const shapeA = (type: string, code: string, message: string) => ({ error: { message, type, param: null, code } });

/**
 * The whole API of api.md against a reference server started as `serve` starts it (in this
 * process, keys made with `keys create --json`), for one deployment: every endpoint used as a
 * client uses it, through the deployment's stores. Every answer, the SDKs' included, is checked
 * against docs/openapi.json. Rules that no deployment changes (authentication, scopes, allowlists,
 * the order of the checks) are tested once, in test/spec and at the level of lib/ that holds them.
 */
export function serverApiSuite(anyTest: TestFn, name: string, deploy: () => Promise<SuiteDeployment>): void {
  const test = anyTest as TestFn<Context>;
  const state = {} as Context;
  const problems: string[] = [];
  const checked = checkedFetch(problems);

  test.before(async () => {
    state.deployment = await deploy();
    const env = state.deployment.env;
    const account = `acme-${Math.random().toString(36).slice(2)}`;
    // One after the other, as a user types them: each command opens the database (and the first migrates it).
    state.keys = {
      all: await createKey(env, ['--account', account]),
      readOnly: await createKey(env, ['--account', account, '--scope', 'files:read', '--scope', 'models:read']),
      echoOneOnly: await createKey(env, ['--account', account, '--model', 'echo-1']),
      otherAccount: await createKey(env, ['--account', `${account}-other`]),
    };
    state.server = await startServer(env);
  });

  test.after.always(async () => {
    await state.server?.stop();
    await state.deployment?.cleanup();
  });

  test.after(`${name}: every answer agrees with docs/openapi.json`, (t) => {
    t.deepEqual(problems, []);
  });

  const call = (method: string, path: string, init: { key?: string; style?: KeyStyle; body?: RequestInit['body']; headers?: Record<string, string> } = {}) =>
    checked(`${state.server.url}${path}`, {
      method,
      headers: { ...authHeaders(init.key, init.style), ...init.headers },
      ...(init.body === undefined ? {} : { body: init.body }),
    });

  const upload = (key: string, style: KeyStyle, pdf: Buffer, filename: string, expiresAfter?: number) =>
    call('POST', '/v1/files', { key, style, body: uploadForm(pdf, filename, expiresAfter) });

  const json = (body: unknown) => JSON.stringify(body);
  const jsonHeaders = { 'content-type': 'application/json' };

  test(`${name}: /healthz and /readyz answer without a key`, async (t) => {
    const health = await call('GET', '/healthz');
    t.is(health.status, 200);
    t.deepEqual(await health.json(), { status: 'ok' });
    const ready = await call('GET', '/readyz');
    t.is(ready.status, 200);
    t.like(await ready.json(), { status: 'ok', checks: { database: 'ok', blobs: 'ok' } });
  });

  for (const style of KEY_STYLES) {
    test(`${name}: upload, list, retrieve, download and delete a PDF with ${style}`, async (t) => {
      const key = state.keys.all.key;
      const pdf = makePdf(2, 100);
      const created = await upload(key, style, pdf, 'report.pdf', 3600);
      t.is(created.status, 200);
      t.regex(created.headers.get('x-request-id') ?? '', REQUEST_ID);
      const file = (await created.json()) as Record<string, unknown>;
      t.like(file, { object: 'file', bytes: pdf.length, filename: 'report.pdf', purpose: 'user_data', status: 'processed' });
      t.regex(file.id as string, /^file-[A-Za-z0-9_-]{32}$/);
      t.is(file.expires_at, (file.created_at as number) + 3600);

      const listed = await call('GET', '/v1/files?order=desc&limit=10000', { key, style });
      t.is(listed.status, 200);
      const list = (await listed.json()) as { object: string; data: Array<{ id: string }>; first_id: string; has_more: boolean };
      t.is(list.object, 'list');
      t.true(list.data.some((entry) => entry.id === file.id));

      const retrieved = await call('GET', `/v1/files/${file.id}`, { key, style });
      t.deepEqual(await retrieved.json(), file);

      const content = await call('GET', `/v1/files/${file.id}/content`, { key, style });
      t.is(content.status, 200);
      t.is(content.headers.get('content-type'), 'application/pdf');
      t.is(content.headers.get('cache-control'), 'private, no-store');
      t.is(content.headers.get('x-content-type-options'), 'nosniff');
      t.is(content.headers.get('content-security-policy'), 'sandbox');
      t.is(content.headers.get('content-length'), String(pdf.length));
      t.regex(content.headers.get('content-disposition') ?? '', /^attachment; filename="report\.pdf"/);
      t.deepEqual(Buffer.from(await content.arrayBuffer()), pdf);

      const deleted = await call('DELETE', `/v1/files/${file.id}`, { key, style });
      t.deepEqual(await deleted.json(), { id: file.id, object: 'file', deleted: true });
      const gone = await call('GET', `/v1/files/${file.id}`, { key, style });
      t.is(gone.status, 404);
      t.deepEqual(await gone.json(), shapeA('invalid_request_error', 'file_not_found', 'File not found'));
    });

    test(`${name}: models, chat completions and messages, with a stored PDF attached, with ${style}`, async (t) => {
      const key = state.keys.all.key;
      const models = await call('GET', '/v1/models', { key, style });
      t.is(models.status, 200);
      t.deepEqual(await models.json(), {
        object: 'list',
        data: [
          { id: 'echo-1', object: 'model', created: 1_744_000_000, owned_by: 'echo' },
          { id: 'echo-2', object: 'model', created: 1_744_000_000, owned_by: 'echo' },
          { id: 'echo-embed-1', object: 'model', created: 1_744_000_000, owned_by: 'echo' },
        ],
      });

      const pdf = makePdf(3);
      const file = (await (await upload(key, style, pdf, 'slides.pdf')).json()) as { id: string };
      const chat = await call('POST', '/v1/chat/completions', {
        key,
        style,
        headers: jsonHeaders,
        body: json({
          model: 'echo-1',
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'What is it?' },
                { type: 'file', file: { file_id: file.id } },
              ],
            },
          ],
        }),
      });
      t.is(chat.status, 200);
      t.regex(chat.headers.get('x-request-id') ?? '', REQUEST_ID);
      const completion = (await chat.json()) as { object: string; choices: Array<{ message: { content: string } }> };
      t.is(completion.object, 'chat.completion');
      t.regex(completion.choices[0]?.message.content ?? '', new RegExp(`slides\\.pdf, ${pdf.length} bytes, 3 pages`));

      const message = await call('POST', '/v1/messages', {
        key,
        style,
        headers: { ...jsonHeaders, 'anthropic-version': '2023-06-01' },
        body: json({
          model: 'echo-2',
          max_tokens: 100,
          messages: [
            {
              role: 'user',
              content: [
                { type: 'document', source: { type: 'file', file_id: file.id } },
                { type: 'text', text: 'Summarise.' },
              ],
            },
          ],
        }),
      });
      t.is(message.status, 200);
      t.regex(message.headers.get('request-id') ?? '', REQUEST_ID);
      const answer = (await message.json()) as { type: string; content: Array<{ text: string }> };
      t.is(answer.type, 'message');
      t.regex(answer.content[0]?.text ?? '', new RegExp(`slides\\.pdf, ${pdf.length} bytes, 3 pages`));
    });
  }

  test(`${name}: a model call refused for its body spends none of the key's requests`, async (t) => {
    const { key } = await createKey(state.deployment.env, ['--account', `rpm-${Math.random().toString(36).slice(2)}`, '--rpm', '1000']);
    // Its own server, its minute begun with the test: the counted calls never straddle two minutes.
    const server = await startServer(state.deployment.env, { nowMs: minuteAlignedClock() });
    t.teardown(() => server.stop());
    const post = (path: string, body: unknown) =>
      checked(`${server.url}${path}`, { method: 'POST', headers: { ...authHeaders(key), ...jsonHeaders }, body: json(body) });
    const hi = [{ role: 'user', content: 'hi' }];
    t.is((await post('/v1/chat/completions', { model: 'echo-1' })).status, 400);
    t.is((await post('/v1/messages', { model: 'echo-1', messages: hi })).status, 400);
    t.is((await post('/v1/responses', { model: 'echo-1', input: 5 })).status, 400);
    t.is((await post('/v1/embeddings', { model: 'echo-embed-1', input: [] })).status, 400);
    const answered = await post('/v1/chat/completions', { model: 'echo-1', messages: hi });
    t.is(answered.status, 200);
    // Counted on this deployment's limiter (Redis with REDIS_URL): the first request of the key's minute.
    t.is(answered.headers.get('x-ratelimit-remaining-requests'), '999');
    const embedded = await post('/v1/embeddings', { model: 'echo-embed-1', input: 'hi' });
    t.is(embedded.status, 200);
    t.is(embedded.headers.get('x-ratelimit-remaining-requests'), '998', 'an embeddings call counts as a model call');
  });

  test(`${name}: embeddings through the openai SDK, its default base64 and floats alike`, async (t) => {
    const client = new OpenAI({ apiKey: state.keys.all.key, baseURL: `${state.server.url}/v1`, maxRetries: 0, fetch: checked });
    const input = ['one two three', 'four five'];
    const decoded = await client.embeddings.create({ model: 'echo-embed-1', input });
    t.like(decoded, { object: 'list', model: 'echo-embed-1', usage: { prompt_tokens: 5, total_tokens: 5 } });
    t.deepEqual((await client.embeddings.create({ model: 'echo-embed-1', input, encoding_format: 'float' })).data, decoded.data);
    const chat = await t.throwsAsync(client.chat.completions.create({ model: 'echo-embed-1', messages: [{ role: 'user', content: 'hi' }] }), {
      instanceOf: OpenAI.BadRequestError,
    });
    t.regex(chat?.message ?? '', /'echo-embed-1' is an embeddings model/);
  });

  test(`${name}: a repeated model call is answered from the response cache, per account, JSON and streamed alike`, async (t) => {
    const body = { model: 'echo-1', messages: [{ role: 'user', content: `cache me ${name}` }] };
    const ask = (key: string, extra: Record<string, unknown> = {}) =>
      call('POST', '/v1/chat/completions', { key, headers: { ...jsonHeaders, 'cache-control': 'max-age=60' }, body: json({ ...body, ...extra }) });
    const first = await ask(state.keys.all.key);
    t.is(first.headers.get('x-kmg-cache'), 'miss');
    const original = (await first.json()) as { id: string; choices: Array<Record<string, unknown>> };
    const second = await ask(state.keys.all.key);
    t.is(second.headers.get('x-kmg-cache'), 'hit');
    t.regex(second.headers.get('age') ?? '', /^\d+$/);
    const replayed = (await second.json()) as typeof original;
    // Written by the gateway's own writer: what the original had, and the fields it may leave out (`annotations: []`).
    t.like(replayed.choices, original.choices);
    t.not(replayed.id, original.id);
    const streamed = await ask(state.keys.all.key, { stream: true });
    t.is(streamed.headers.get('x-kmg-cache'), 'hit');
    t.regex(await streamed.text(), /data: \[DONE\]/);
    // Another account's same body is its own.
    t.is((await ask(state.keys.otherAccount.key)).headers.get('x-kmg-cache'), 'miss');
  });

  test(`${name}: the Responses API, models by id in both shapes, and Messages token counts`, async (t) => {
    const key = state.keys.all.key;
    const pdf = makePdf(2);
    const file = (await (await upload(key, 'bearer', pdf, 'deck.pdf')).json()) as { id: string };
    const created = await call('POST', '/v1/responses', {
      key,
      headers: jsonHeaders,
      body: json({
        model: 'echo-2',
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'What is it?' },
              { type: 'input_file', file_id: file.id },
            ],
          },
        ],
      }),
    });
    t.is(created.status, 200);
    const response = (await created.json()) as { object: string; output: Array<{ content: Array<{ text: string }> }> };
    t.is(response.object, 'response');
    t.regex(response.output[0]?.content[0]?.text ?? '', new RegExp(`deck\\.pdf, ${pdf.length} bytes, 2 pages`));

    t.deepEqual(await (await call('GET', '/v1/models/echo-1', { key })).json(), { id: 'echo-1', object: 'model', created: 1_744_000_000, owned_by: 'echo' });
    const anthropic = await call('GET', '/v1/models/echo-1', { key, headers: { 'anthropic-version': '2023-06-01' } });
    t.regex(anthropic.headers.get('request-id') ?? '', REQUEST_ID);
    t.deepEqual(await anthropic.json(), {
      type: 'model',
      id: 'echo-1',
      display_name: 'echo-1',
      created_at: '2025-04-07T04:26:40Z',
      max_input_tokens: null,
      max_tokens: null,
      lifecycle: 'active',
      deprecated_at: null,
      retires_at: null,
      capabilities: null,
      line: null,
    });

    const counted = await call('POST', '/v1/messages/count_tokens', {
      key,
      headers: { ...jsonHeaders, 'anthropic-version': '2023-06-01' },
      body: json({ model: 'echo-1', messages: [{ role: 'user', content: 'three words here' }] }),
    });
    t.deepEqual(await counted.json(), { input_tokens: 3 });
  });

  test(`${name}: GET /openapi.json is the document, without a key`, async (t) => {
    const response = await call('GET', '/openapi.json');
    t.is(response.status, 200);
    t.regex(response.headers.get('content-type') ?? '', /^application\/json/);
    t.deepEqual(await response.json(), OPENAPI_DOCUMENT);
  });

  test(`${name}: unknown routes are 404 unknown_url, wrong methods 405 method_not_allowed`, async (t) => {
    const key = state.keys.all.key;
    const unknown = await call('GET', '/v1/no-such-route', { key });
    t.is(unknown.status, 404);
    t.deepEqual(await unknown.json(), shapeA('invalid_request_error', 'unknown_url', 'Unknown request URL: GET /v1/no-such-route'));
    const outside = await call('GET', '/no-such-page');
    t.is(outside.status, 404);
    t.deepEqual(await outside.json(), shapeA('invalid_request_error', 'unknown_url', 'Unknown request URL: GET /no-such-page'));
    for (const [method, path, allowed] of [
      ['PUT', '/v1/models', 'GET, HEAD'],
      ['PATCH', '/v1/files', 'GET, HEAD, POST'],
      ['POST', '/v1/files/file-00000000000000000000000000000000', 'DELETE, GET, HEAD'],
      ['GET', '/v1/chat/completions', 'POST'],
    ] as const) {
      const response = await call(method, path, { key });
      t.is(response.status, 405, `${method} ${path}`);
      const allow = (response.headers.get('allow') ?? '').split(', ').sort().join(', ');
      t.is(allow, allowed, `Allow on ${method} ${path}`);
      t.deepEqual(await response.json(), shapeA('invalid_request_error', 'method_not_allowed', `Method ${method} is not allowed on this URL`));
    }
  });

  test(`${name}: the official openai SDK manages files and lists models`, async (t) => {
    const client = new OpenAI({ apiKey: state.keys.all.key, baseURL: `${state.server.url}/v1`, maxRetries: 0, fetch: checked });
    const pdf = makePdf(1, 500);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const file = await client.files.create({
        file: await toFile(pdf, `sdk-${i}.pdf`, { type: 'application/pdf' }),
        purpose: 'user_data',
        expires_after: { anchor: 'created_at', seconds: 7200 },
      });
      t.is(file.bytes, pdf.length);
      t.is(file.expires_at, file.created_at + 7200);
      ids.push(file.id);
    }
    const seen: string[] = [];
    for await (const file of client.files.list({ limit: 2, order: 'asc' })) seen.push(file.id);
    // Creation order; files of the same second in id order.
    t.deepEqual(
      seen.filter((id) => ids.includes(id)),
      [...ids].sort(),
    );
    t.is((await client.files.retrieve(ids[0] as string)).filename, 'sdk-0.pdf');
    t.deepEqual(Buffer.from(await (await client.files.content(ids[1] as string)).arrayBuffer()), pdf);
    t.true((await client.files.delete(ids[2] as string)).deleted);

    const notFound = await t.throwsAsync(client.files.retrieve(ids[2] as string), { instanceOf: OpenAI.NotFoundError });
    t.is(notFound?.code, 'file_not_found');
    t.regex(notFound?.requestID ?? '', REQUEST_ID);
    const invalid = await t.throwsAsync(client.files.retrieve('file-nope'), { instanceOf: OpenAI.BadRequestError });
    t.is(invalid?.code, 'invalid_file_id');

    const models = [];
    for await (const model of client.models.list()) models.push(model.id);
    t.deepEqual(models, ['echo-1', 'echo-2', 'echo-embed-1']);

    const denied = new OpenAI({ apiKey: state.keys.readOnly.key, baseURL: `${state.server.url}/v1`, maxRetries: 0, fetch: checked });
    const forbidden = await t.throwsAsync(denied.files.create({ file: await toFile(pdf, 'x.pdf'), purpose: 'user_data' }), {
      instanceOf: OpenAI.PermissionDeniedError,
    });
    t.is(forbidden?.code, 'forbidden');
    const anonymous = new OpenAI({ apiKey: 'kmg_sk_wrong', baseURL: `${state.server.url}/v1`, maxRetries: 0, fetch: checked });
    const unauthenticated = await t.throwsAsync(anonymous.models.list(), { instanceOf: OpenAI.AuthenticationError });
    t.is(unauthenticated?.code, 'invalid_api_key');
  });

  test(`${name}: the official SDKs ask the models through the server, streaming included`, async (t) => {
    const openai = new OpenAI({ apiKey: state.keys.all.key, baseURL: `${state.server.url}/v1`, maxRetries: 0, fetch: checked });
    const pdf = makePdf(2);
    const file = await openai.files.create({ file: await toFile(pdf, 'lease.pdf'), purpose: 'user_data' });
    let streamed = '';
    const chunks = await openai.chat.completions.create({
      model: 'echo-1',
      stream: true,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Terms?' },
            { type: 'file', file: { file_id: file.id } },
          ],
        },
      ],
    });
    for await (const chunk of chunks) streamed += chunk.choices[0]?.delta.content ?? '';
    t.regex(streamed, new RegExp(`lease\\.pdf, ${pdf.length} bytes, 2 pages`));

    // The Anthropic SDK sends x-api-key.
    const anthropic = new Anthropic({ apiKey: state.keys.all.key, baseURL: state.server.url, maxRetries: 0, fetch: checked });
    const message = await anthropic.messages.create({
      model: 'echo-2',
      max_tokens: 100,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'document', source: { type: 'file', file_id: file.id } },
            { type: 'text', text: 'Terms?' },
          ],
        },
      ],
    });
    t.regex(message.content[0]?.type === 'text' ? message.content[0].text : '', /lease\.pdf/);
    const stream = anthropic.messages.stream({ model: 'echo-2', max_tokens: 100, messages: [{ role: 'user', content: 'stream please' }] });
    t.is((await stream.finalMessage()).stop_reason, 'end_turn');

    const cases: Array<[string, string, new (...args: never[]) => InstanceType<typeof Anthropic.APIError>]> = [
      ['kmg_sk_not-a-key', 'echo-1', Anthropic.AuthenticationError],
      [state.keys.readOnly.key, 'echo-1', Anthropic.PermissionDeniedError],
      [state.keys.echoOneOnly.key, 'echo-2', Anthropic.NotFoundError],
    ];
    for (const [apiKey, model, errorClass] of cases) {
      const client = new Anthropic({ apiKey, baseURL: state.server.url, maxRetries: 0, fetch: checked });
      const error = await t.throwsAsync(client.messages.create({ model, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }), {
        instanceOf: errorClass,
      });
      t.regex(error?.requestID ?? '', REQUEST_ID);
    }
  });

  test(`${name}: Anthropic's SDK manages files in Anthropic's shape, over the same files as the openai SDK, and attaches them`, async (t) => {
    const key = state.keys.otherAccount.key;
    const anthropic = new Anthropic({ apiKey: key, baseURL: state.server.url, maxRetries: 0, fetch: checked });
    const openai = new OpenAI({ apiKey: key, baseURL: `${state.server.url}/v1`, maxRetries: 0, fetch: checked });
    const viaOpenAI = await openai.files.create({ file: await toFile(makePdf(1, 200), 'openai.pdf'), purpose: 'user_data' });
    const pdfs = [makePdf(2, 100), makePdf(3, 100), makePdf(1, 300)];
    const uploaded = [];
    for (const [index, pdf] of pdfs.entries()) {
      uploaded.push(
        await anthropic.beta.files.upload({
          file: await Anthropic.toFile(pdf, `claude-${index}.pdf`, { type: 'application/pdf' }),
          ...(index === 0 ? { expires_in_seconds: 7200 } : {}),
        }),
      );
    }
    const [first, second] = uploaded as [Anthropic.Beta.BetaFileMetadata, Anthropic.Beta.BetaFileMetadata];
    t.like(first, { type: 'file', filename: 'claude-0.pdf', mime_type: 'application/pdf', size_bytes: pdfs[0]?.length, downloadable: true });
    t.is(Date.parse(first.expires_at ?? '') - Date.parse(first.created_at), 7_200_000);
    t.false('expires_at' in second);

    // Newest first, two to a page: the openai SDK's file too.
    const listed: string[] = [];
    for await (const file of anthropic.beta.files.list({ limit: 2 })) listed.push(file.id);
    t.deepEqual(listed, [...uploaded.map((file) => file.id)].reverse().concat(viaOpenAI.id));
    t.like(await anthropic.beta.files.retrieveMetadata(viaOpenAI.id), { type: 'file', filename: 'openai.pdf', size_bytes: viaOpenAI.bytes });
    t.like(await openai.files.retrieve(second.id), { object: 'file', filename: 'claude-1.pdf', bytes: pdfs[1]?.length });
    t.deepEqual(Buffer.from(await (await anthropic.beta.files.download(second.id)).arrayBuffer()), pdfs[1]);

    const documentOf = (fileId: string): Anthropic.MessageParam[] => [
      {
        role: 'user',
        content: [
          { type: 'document', source: { type: 'file', file_id: fileId } },
          { type: 'text', text: 'Summarise.' },
        ],
      },
    ];
    const whole = await anthropic.messages.create({ model: 'echo-2', max_tokens: 100, messages: documentOf(second.id) });
    t.regex(whole.content[0]?.type === 'text' ? whole.content[0].text : '', new RegExp(`claude-1\\.pdf, ${pdfs[1]?.length} bytes, 3 pages`));
    const streamed = await anthropic.messages.stream({ model: 'echo-2', max_tokens: 100, messages: documentOf(viaOpenAI.id) }).finalMessage();
    t.regex(streamed.content[0]?.type === 'text' ? streamed.content[0].text : '', /openai\.pdf, \d+ bytes, 1 pages?/);
    const chat = await openai.chat.completions.create({
      model: 'echo-1',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is it?' },
            { type: 'file', file: { file_id: first.id } },
          ],
        },
      ],
    });
    t.regex(chat.choices[0]?.message.content ?? '', new RegExp(`claude-0\\.pdf, ${pdfs[0]?.length} bytes, 2 pages`));

    t.deepEqual(await anthropic.beta.files.delete(second.id), { id: second.id, type: 'file_deleted' });
    const foreign = await openai.files.create({ file: await toFile(makePdf(1), 'theirs.pdf'), purpose: 'user_data' });
    const theirs = new Anthropic({ apiKey: state.keys.all.key, baseURL: state.server.url, maxRetries: 0, fetch: checked });
    const refusals: Array<[Promise<unknown>, new (...args: never[]) => InstanceType<typeof Anthropic.APIError>, string, string]> = [
      [anthropic.beta.files.retrieveMetadata(second.id), Anthropic.NotFoundError, 'not_found_error', 'File not found'],
      [theirs.beta.files.download(foreign.id), Anthropic.NotFoundError, 'not_found_error', 'File not found'],
      [anthropic.beta.files.delete('file-nope'), Anthropic.BadRequestError, 'invalid_request_error', 'Invalid file ID'],
      [
        anthropic.beta.files.upload({ file: await Anthropic.toFile(Buffer.from('not a pdf'), 'fake.pdf') }),
        Anthropic.BadRequestError,
        'invalid_request_error',
        'File is not a PDF',
      ],
    ];
    for (const [call, errorClass, type, message] of refusals) {
      const error = await t.throwsAsync(call, { instanceOf: errorClass });
      t.regex(error?.requestID ?? '', REQUEST_ID);
      t.deepEqual(error?.error, { type: 'error', error: { type, message }, request_id: error?.requestID });
    }
  });

  test(`${name}: the three file 429s reach Anthropic's SDK as RateLimitError, and count uploads of both shapes together`, async (t) => {
    // A second server on the same database, Redis and files, with small limits.
    const temp = await tempDataDir();
    t.teardown(() => temp.remove());
    const env = { ...state.deployment.env, GATEWAY_CONFIG: join(temp.dir, 'gateway.json') };
    await writeFile(env.GATEWAY_CONFIG, JSON.stringify({ limits: { maxFiles: 2, createsPerMinute: 3, bytesPerDay: 3000 } }));
    const account = `limits-${Math.random().toString(36).slice(2)}`;
    const [mixed, heavy] = [await createKey(env, ['--account', account]), await createKey(env, ['--account', `${account}-heavy`])];
    const server = await startServer(env, { nowMs: minuteAlignedClock() });
    t.teardown(() => server.stop());
    const anthropic = (key: string) => new Anthropic({ apiKey: key, baseURL: server.url, maxRetries: 0, fetch: checked });
    const openai = new OpenAI({ apiKey: mixed.key, baseURL: `${server.url}/v1`, maxRetries: 0, fetch: checked });
    const pdf = (bytes: number) => Anthropic.toFile(makePdf(1, bytes), 'small.pdf', { type: 'application/pdf' });
    const refused = async (call: Promise<unknown>, message: string) => {
      const error = await t.throwsAsync(call, { instanceOf: Anthropic.RateLimitError });
      t.regex(error?.requestID ?? '', REQUEST_ID);
      t.deepEqual(error?.error, { type: 'error', error: { type: 'rate_limit_error', message }, request_id: error?.requestID });
      return error?.headers;
    };

    const first = await openai.files.create({ file: await toFile(makePdf(1), 'openai.pdf'), purpose: 'user_data' });
    await anthropic(mixed.key).beta.files.upload({ file: await pdf(10) });
    const kept = await refused(anthropic(mixed.key).beta.files.upload({ file: await pdf(10) }), 'Storage quota exceeded');
    t.is(kept?.get('x-should-retry'), 'false');
    await t.throwsAsync(openai.files.create({ file: await toFile(makePdf(1), 'openai.pdf'), purpose: 'user_data' }), { instanceOf: OpenAI.RateLimitError });
    t.deepEqual(await anthropic(mixed.key).beta.files.delete(first.id), { id: first.id, type: 'file_deleted' });
    await openai.files.create({ file: await toFile(makePdf(1), 'openai.pdf'), purpose: 'user_data' });
    const rate = await refused(anthropic(mixed.key).beta.files.upload({ file: await pdf(10) }), 'Create rate exceeded');
    t.regex(rate?.get('retry-after') ?? '', /^[0-9]+$/);

    await anthropic(heavy.key).beta.files.upload({ file: await pdf(1500) });
    const ingestion = await refused(anthropic(heavy.key).beta.files.upload({ file: await pdf(1500) }), 'Ingestion quota exceeded');
    t.regex(ingestion?.get('retry-after') ?? '', /^[0-9]+$/);
  });

  test(`${name}: security headers on every response`, async (t) => {
    const key = state.keys.all.key;
    const responses = [
      await call('GET', '/healthz'),
      await call('GET', '/v1/models', { key }),
      await call('GET', '/v1/models'),
      await call('GET', '/v1/no-such-route', { key }),
      await call('POST', '/v1/messages', { key, headers: jsonHeaders, body: '{' }),
    ];
    for (const response of responses) {
      t.is(response.headers.get('x-content-type-options'), 'nosniff', response.url);
      t.is(response.headers.get('content-security-policy'), "default-src 'none'; frame-ancestors 'none'", response.url);
    }
  });

  test(`${name}: one log line per request, with its request id, key id and account, never the key`, async (t) => {
    const key = state.keys.all;
    const response = await call('GET', '/v1/files', { key: key.key, style: 'x-api-key' });
    const requestId = response.headers.get('x-request-id');
    await response.arrayBuffer();
    const line = await waitFor(() => state.server.logs.find((entry) => entry.requestId === requestId));
    t.like(line, { msg: 'request', keyId: key.id, account: key.account, method: 'GET', route: '/v1/files', path: '/v1/files', status: 200 });
    t.is(typeof line.durationMs, 'number');
    const all = JSON.stringify(state.server.logs);
    for (const { key: secret } of Object.values(state.keys)) t.false(all.includes(secret));
  });
}

/** The value once `find` returns one; the server writes a request's log line when the response is over. */
async function waitFor<T>(find: () => T | undefined): Promise<T> {
  const found = await until(
    async () => find(),
    (value) => value !== undefined,
    { intervalMs: 25, attempts: 200 },
  );
  if (found === undefined) throw new Error('not found within 5 s');
  return found;
}
