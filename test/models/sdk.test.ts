import { PassThrough } from 'node:stream';
import Anthropic from '@anthropic-ai/sdk';
import test from 'ava';
import OpenAI from 'openai';
import { catalogProviders, modelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { anthropicMessage, reply, replyEvents, scriptedUpstream } from '../helpers/models-upstream.js';

// The official SDKs as clients of the composed gateway, in front of a real upstream whose answers
// each test scripts: the tests run serially.
const upstream = await scriptedUpstream();
const gateway = await modelsApp({ providers: catalogProviders(upstream.url) });
test.after.always(() => Promise.all([gateway.close(), upstream.close()]));

const REQUEST_ID = /^req_[A-Za-z0-9]{32}$/;
const openai = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
const anthropic = (apiKey: string) => new Anthropic({ apiKey, baseURL: gateway.url, maxRetries: 0 });
const pdf = makePdf(3, 200);

test.serial('openai SDK: chat.completions.create against echo, with a stored PDF attached by file id', async (t) => {
  const fileId = await gateway.storePdf(pdf, { filename: 'slides.pdf' });
  const completion = await openai(await gateway.keyFor()).chat.completions.create({
    model: 'echo-1',
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Describe it.' }, { type: 'file', file: { file_id: fileId } }] }],
  });
  t.is(completion.object, 'chat.completion');
  t.is(
    completion.choices[0]?.message.content,
    `Echo from echo-upstream-1: received 1 message.\nThe last user message says: "Describe it."\nDocument 1: slides.pdf, ${pdf.length} bytes, 3 pages.`,
  );
});

test.serial('openai SDK: streaming against echo', async (t) => {
  const stream = await openai(await gateway.keyFor()).chat.completions.create({
    model: 'echo-1',
    stream: true,
    messages: [{ role: 'user', content: 'stream please' }],
  });
  let text = '';
  let chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    text += chunk.choices[0]?.delta.content ?? '';
  }
  t.true(chunks > 2);
  t.is(text, 'Echo from echo-upstream-1: received 1 message.\nThe last user message says: "stream please"\nNo documents are attached.');
});

test.serial('openai SDK: against an OpenAI upstream, whole and streamed', async (t) => {
  const client = openai(await gateway.keyFor());
  upstream.answer(
    '/v1/chat/completions',
    reply(200, {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1,
      model: 'gpt-4o-mini-2024-07-18',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hi from upstream', refusal: null }, logprobs: null, finish_reason: 'stop' }],
    }),
  );
  const completion = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] });
  t.is(completion.choices[0]?.message.content, 'Hi from upstream');

  const chunk = (content: string) =>
    `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
  upstream.answer('/v1/chat/completions', reply(200, [chunk('Hi '), chunk('there'), 'data: [DONE]\n\n'].join(''), { 'content-type': 'text/event-stream' }));
  let text = '';
  for await (const part of await client.chat.completions.create({ model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'hi' }] })) {
    text += part.choices[0]?.delta.content ?? '';
  }
  t.is(text, 'Hi there');
});

test.serial('openai SDK: a failure mid-stream surfaces as an APIError with our message', async (t) => {
  const body = new PassThrough();
  upstream.answer('/v1/chat/completions', replyEvents(body));
  body.write(`data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] })}\n\n`);
  const stream = await openai(await gateway.keyFor()).chat.completions.create({ model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  const error = await t.throwsAsync(async () => {
    for await (const part of stream) {
      t.is(part.choices[0]?.delta.content, 'Hi');
      body.destroy(new Error('upstream connection reset'));
    }
  }, { instanceOf: OpenAI.APIError });
  t.is(error?.message, 'Upstream provider error');
  t.like(error?.error, { type: 'server_error', code: 'upstream_error' });
});

test.serial('openai SDK: 401, 403 and 404 as AuthenticationError, PermissionDeniedError and NotFoundError with our request id', async (t) => {
  const cases: Array<[string, string, new (...args: never[]) => InstanceType<typeof OpenAI.APIError>, number, string, string]> = [
    ['kmg_sk_not-a-key', 'echo-1', OpenAI.AuthenticationError, 401, 'invalid_api_key', 'Invalid API key'],
    [await gateway.keyFor(undefined, { models: ['gpt-test'] }), 'echo-1', OpenAI.PermissionDeniedError, 403, 'forbidden', "Model 'echo-1' is not allowed for this API key"],
    [await gateway.keyFor(), 'no-such-model', OpenAI.NotFoundError, 404, 'model_not_found', "The model 'no-such-model' does not exist"],
  ];
  for (const [key, model, errorClass, status, code, message] of cases) {
    const error = await t.throwsAsync(openai(key).chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }), {
      instanceOf: errorClass,
    });
    t.is(error?.status, status);
    t.is(error?.code, code);
    t.is(error?.error && (error.error as { message?: string }).message, message);
    t.regex(error?.requestID ?? '', REQUEST_ID);
  }
});

test.serial('anthropic SDK: messages.create against echo, with a stored PDF attached by file id', async (t) => {
  const fileId = await gateway.storePdf(pdf, { filename: 'lease.pdf' });
  const message = await anthropic(await gateway.keyFor()).messages.create({
    model: 'echo-1',
    max_tokens: 100,
    messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: fileId } }, { type: 'text', text: 'Key terms?' }] }],
  });
  t.is(message.type, 'message');
  t.deepEqual(message.content, [
    {
      type: 'text',
      text: `Echo from echo-upstream-1: received 1 message.\nThe last user message says: "Key terms?"\nDocument 1: lease.pdf, ${pdf.length} bytes, 3 pages.`,
    },
  ]);
});

test.serial('anthropic SDK: streaming against echo', async (t) => {
  const stream = anthropic(await gateway.keyFor()).messages.stream({ model: 'echo-1', max_tokens: 100, messages: [{ role: 'user', content: 'stream please' }] });
  let text = '';
  stream.on('text', (delta) => {
    text += delta;
  });
  const final = await stream.finalMessage();
  t.is(final.stop_reason, 'end_turn');
  t.is(text, 'Echo from echo-upstream-1: received 1 message.\nThe last user message says: "stream please"\nNo documents are attached.');
});

test.serial('anthropic SDK: against an Anthropic upstream, whole and streamed', async (t) => {
  const client = anthropic(await gateway.keyFor());
  upstream.answer('/v1/messages', reply(200, anthropicMessage('Hi from upstream')));
  const message = await client.messages.create({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
  t.deepEqual(message.content, [{ type: 'text', text: 'Hi from upstream' }]);

  const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  upstream.answer(
    '/v1/messages',
    reply(
      200,
      [
        event('message_start', { message: { id: 'msg_2', type: 'message', role: 'assistant', model: 'claude', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 0 } } }),
        event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
        event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hi ' } }),
        event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'there' } }),
        event('content_block_stop', { index: 0 }),
        event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 2 } }),
        event('message_stop', {}),
      ].join(''),
      { 'content-type': 'text/event-stream' },
    ),
  );
  const final = await client.messages.stream({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
  t.like(final.content[0], { type: 'text', text: 'Hi there' });
});

test.serial('anthropic SDK: a failure mid-stream surfaces as an APIError', async (t) => {
  const body = new PassThrough();
  upstream.answer('/v1/messages', replyEvents(body));
  body.write(
    `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { id: 'msg_3', type: 'message', role: 'assistant', model: 'claude', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 0 } } })}\n\n`,
  );
  const stream = await anthropic(await gateway.keyFor()).messages.create({ model: 'claude-test', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'hi' }] });
  const error = await t.throwsAsync(async () => {
    for await (const event of stream) {
      t.is(event.type, 'message_start');
      body.destroy(new Error('upstream connection reset'));
    }
  }, { instanceOf: Anthropic.APIError });
  t.like(error?.error, { type: 'error', error: { type: 'api_error', message: 'Upstream provider error' } });
});

test.serial('anthropic SDK: 401, 403 and 404 as AuthenticationError, PermissionDeniedError and NotFoundError with our request id', async (t) => {
  const fileId = await gateway.storePdf(pdf);
  const attach = [{ role: 'user' as const, content: [{ type: 'document' as const, source: { type: 'file' as const, file_id: fileId } }] }];
  const plain = [{ role: 'user' as const, content: 'hi' }];
  const cases: Array<[string, string, typeof plain | typeof attach, new (...args: never[]) => InstanceType<typeof Anthropic.APIError>, number, string, string]> = [
    ['kmg_sk_not-a-key', 'echo-1', plain, Anthropic.AuthenticationError, 401, 'authentication_error', 'Invalid API key'],
    [await gateway.keyFor(['messages:create']), 'echo-1', attach, Anthropic.PermissionDeniedError, 403, 'permission_error', 'Forbidden'],
    [await gateway.keyFor(undefined, { models: ['claude-test'] }), 'echo-1', plain, Anthropic.NotFoundError, 404, 'not_found_error', 'Model not found'],
    [await gateway.keyFor(), 'no-such-model', plain, Anthropic.NotFoundError, 404, 'not_found_error', 'Model not found'],
  ];
  for (const [key, model, messages, errorClass, status, type, message] of cases) {
    const error = await t.throwsAsync(anthropic(key).messages.create({ model, max_tokens: 10, messages }), { instanceOf: errorClass });
    t.is(error?.status, status);
    t.regex(error?.requestID ?? '', REQUEST_ID);
    t.deepEqual(error?.error, { type: 'error', error: { type, message }, request_id: error?.requestID });
  }
});
