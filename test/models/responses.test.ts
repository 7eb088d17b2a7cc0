import { PassThrough } from 'node:stream';
import test from 'ava';
import { responseObject, responseUsage } from '../../lib/models/formats/responses/endpoint.js';
import { OPENAI_PROVIDER_KEY, catalogProviders, modelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { reply, replyEvents, scriptedUpstream } from '../helpers/models-upstream.js';

// A real upstream, its answers scripted by each test: the tests run serially.
const upstream = await scriptedUpstream();
const gateway = await modelsApp({ providers: catalogProviders(upstream.url) });
test.after.always(() => Promise.all([gateway.close(), upstream.close()]));

const create = (key: string, body: unknown) => gateway.post('/v1/responses', body, { authorization: `Bearer ${key}` });
const shapeA = (type: string, code: string, message: string) => ({ error: { message, type, param: null, code } });
const answer = async (response: Response) => [response.status, await response.json()] as const;
const withFile = (fileId: unknown) => [{ role: 'user', content: [{ type: 'input_text', text: 'Read it.' }, { type: 'input_file', file_id: fileId }] }];

const upstreamAnswer = {
  id: 'resp_upstream',
  object: 'response',
  created_at: 1_744_000_000,
  status: 'completed',
  model: 'gpt-4o-mini-2024-07-18',
  output: [{ id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'A report.', annotations: [] }] }],
  usage: { input_tokens: 12, output_tokens: 2, total_tokens: 14 },
};

test.serial('the allowlist policy of Chat Completions: 403 with the exact message outside it, existing or not; 404 for an unknown model', async (t) => {
  const restricted = await gateway.keyFor(undefined, { models: ['gpt-test'] });
  for (const model of ['echo-1', 'no-such-model']) {
    t.deepEqual(await answer(await create(restricted, { model, input: 'hi' })), [
      403,
      shapeA('permission_error', 'forbidden', `Model '${model}' is not allowed for this API key`),
    ]);
  }
  t.deepEqual(await answer(await create(await gateway.keyFor(), { model: 'no-such-model', input: 'hi' })), [
    404,
    shapeA('invalid_request_error', 'model_not_found', "The model 'no-such-model' does not exist"),
  ]);
});

test.serial('needs responses:create; a model whose provider speaks no format a Responses call translates to is 400', async (t) => {
  t.deepEqual(await answer(await create(await gateway.keyFor(['chat:completions', 'files:read']), { model: 'echo-1', input: 'hi' })), [
    403,
    shapeA('permission_error', 'forbidden', 'Forbidden'),
  ]);
  const counting = await modelsApp({ catalog: [{ id: 'counter', provider: 'counts-only' }], providers: [{ id: 'counts-only', countTokens: () => Promise.reject(new Error('not called')) }] });
  const [status, body] = await answer(await counting.post('/v1/responses', { model: 'counter', input: 'hi' }, { authorization: `Bearer ${await counting.keyFor()}` }));
  await counting.close();
  t.is(status, 400);
  t.like(body, { error: { type: 'invalid_request_error', message: "The model 'counter' is not served on /v1/responses: its provider speaks no format a Responses call can be translated to" } });
});

test.serial('input_file by file_id: needs files:read, 400 when malformed, 404 when foreign; no other part may name a file', async (t) => {
  const foreign = await gateway.storePdf(makePdf(1), { account: 'someone-else' });
  t.deepEqual(await answer(await create(await gateway.keyFor(['responses:create']), { model: 'echo-1', input: withFile(foreign) })), [
    403,
    shapeA('permission_error', 'forbidden', 'Forbidden'),
  ]);
  const key = await gateway.keyFor();
  t.deepEqual(await answer(await create(key, { model: 'echo-1', input: withFile('file-nope') })), [
    400,
    shapeA('invalid_request_error', 'invalid_file_id', 'Invalid file ID'),
  ]);
  t.deepEqual(await answer(await create(key, { model: 'echo-1', input: withFile(foreign) })), [
    404,
    shapeA('invalid_request_error', 'file_not_found', 'File not found'),
  ]);
  const image = [{ role: 'user', content: [{ type: 'input_image', file_id: foreign }] }];
  const [status, body] = await answer(await create(key, { model: 'echo-1', input: image }));
  t.is(status, 400);
  t.like(body, { error: { message: 'Files are attached as {"type":"input_file","file_id"} parts only' } });
});

test.serial('an openai provider gets {baseURL}/responses with the upstream model, the PDF itself and its own key', async (t) => {
  const from = upstream.received.length;
  upstream.answer('/v1/responses', reply(200, upstreamAnswer));
  const pdf = makePdf(2, 300);
  const fileId = await gateway.storePdf(pdf, { filename: 'q3.pdf' });
  const response = await create(await gateway.keyFor(), { model: 'gpt-test', instructions: 'Be brief.', input: withFile(fileId) });
  t.is(response.status, 200);
  t.regex(response.headers.get('x-request-id') ?? '', /^req_[A-Za-z0-9]{32}$/);
  t.like(await response.json(), { id: upstreamAnswer.id, output: upstreamAnswer.output, usage: upstreamAnswer.usage });
  const received = upstream.received.slice(from).map(({ path, headers, body }) => ({ path, authorization: headers.authorization, body }));
  t.deepEqual(received, [
    {
      path: '/v1/responses',
      authorization: `Bearer ${OPENAI_PROVIDER_KEY}`,
      body: {
        model: 'gpt-4o-mini-2024-07-18',
        instructions: 'Be brief.',
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'Read it.' },
              { type: 'input_file', filename: 'q3.pdf', file_data: `data:application/pdf;base64,${pdf.toString('base64')}` },
            ],
          },
        ],
      },
    },
  ]);
});

test.serial('a streamed answer passes through event by event; a failure after that is an error event', async (t) => {
  const events = new PassThrough();
  upstream.answer('/v1/responses', replyEvents(events));
  const created = `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', sequence_number: 0, response: { ...upstreamAnswer, status: 'in_progress', output: [], usage: null } })}\n\n`;
  events.write(created);
  const response = await create(await gateway.keyFor(), { model: 'gpt-test', input: 'hi', stream: true });
  t.is(response.status, 200);
  t.regex(response.headers.get('content-type') ?? '', /^text\/event-stream/);
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const first = (await reader.read()).value ?? '';
  t.true(first.startsWith('event: response.created\ndata: '));
  t.like(JSON.parse(first.slice(first.indexOf('{'))), { type: 'response.created', sequence_number: 0, response: { id: 'resp_upstream' } });
  events.destroy(new Error('connection reset'));
  let rest = '';
  for (let read = await reader.read(); !read.done; read = await reader.read()) rest += read.value;
  t.is(rest, `event: error\ndata: ${JSON.stringify({ type: 'error', code: 'upstream_error', message: 'Upstream provider error', param: null, sequence_number: 0 })}\n\n`);
});

test.serial('responseObject() and responseUsage() find the model and the usage where a Responses answer keeps them, whole or streamed', async (t) => {
  const key = await gateway.keyFor();
  const body = { model: 'echo-1', instructions: 'Be brief.', input: 'Count my words' };
  const whole = (await (await create(key, body)).json()) as Record<string, unknown>;
  const response = responseObject(whole, false);
  t.is(typeof response?.model, 'string');
  t.deepEqual(responseUsage(response ?? {}), { inputTokens: 5, outputTokens: 18, cacheReadTokens: 0, cacheWriteTokens: 0 });

  const streamed = await (await create(key, { ...body, stream: true })).text();
  const events = streamed
    .split('\n\n')
    .filter((event) => event !== '')
    .map((event) => JSON.parse(event.slice(event.indexOf('data: ') + 6)) as Record<string, unknown>);
  const found = events.flatMap((event) => {
    const object = responseObject(event, true);
    return object === undefined ? [] : [{ type: event.type, model: object.model, usage: responseUsage(object) }];
  });
  t.deepEqual(found, [
    { type: 'response.created', model: response?.model, usage: undefined },
    { type: 'response.in_progress', model: response?.model, usage: undefined },
    { type: 'response.completed', model: response?.model, usage: { inputTokens: 5, outputTokens: 18, cacheReadTokens: 0, cacheWriteTokens: 0 } },
  ]);
});

test('responseUsage() reads the tokens read from and written to the cache, each on its own', (t) => {
  const usage = { input_tokens: 1200, output_tokens: 40, input_tokens_details: { cached_tokens: 1000, cache_write_tokens: 150 } };
  t.deepEqual(responseUsage({ usage }), { inputTokens: 1200, outputTokens: 40, cacheReadTokens: 1000, cacheWriteTokens: 150 });
  const older = { input_tokens: 12, output_tokens: 4, input_tokens_details: { cached_tokens: 0 } };
  t.deepEqual(responseUsage({ usage: older }), { inputTokens: 12, outputTokens: 4, cacheReadTokens: 0 });
});
