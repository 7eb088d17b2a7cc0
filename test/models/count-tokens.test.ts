import test from 'ava';
import { ANTHROPIC_PROVIDER_KEY, catalogProviders, modelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { reply, scriptedUpstream } from '../helpers/models-upstream.js';

// A real upstream, its answers scripted by each test: the tests run serially.
const upstream = await scriptedUpstream();
const gateway = await modelsApp({ providers: catalogProviders(upstream.url) });
test.after.always(() => Promise.all([gateway.close(), upstream.close()]));

const REQUEST_ID = /^req_[A-Za-z0-9]{32}$/;
const count = (key: string, body: unknown, headers: Record<string, string> = {}) =>
  gateway.post('/v1/messages/count_tokens', body, { 'x-api-key': key, 'anthropic-version': '2023-06-01', ...headers });

/** A Messages-style answer: status and body, with a request-id header that an error body repeats. */
async function shapeB(t: { is(a: unknown, b: unknown): void; regex(a: string, r: RegExp): void }, response: Response) {
  const body = (await response.json()) as { request_id?: string };
  const requestId = response.headers.get('request-id') ?? '';
  t.regex(requestId, REQUEST_ID);
  if (response.status >= 400) t.is(body.request_id, requestId);
  return [response.status, { ...body, request_id: undefined }] as const;
}

const errorB = (type: string, message: string) => ({ type: 'error', error: { type, message }, request_id: undefined });

test.serial('an anthropic provider gets {baseURL}/v1/messages/count_tokens with the upstream model, the PDF itself, its key and the client headers', async (t) => {
  const from = upstream.received.length;
  upstream.answer('/v1/messages/count_tokens', reply(200, { input_tokens: 1234 }));
  const pdf = makePdf(1, 100);
  const fileId = await gateway.storePdf(pdf, { filename: 'brief.pdf' });
  const key = await gateway.keyFor();
  const response = await count(
    key,
    { model: 'claude-test', messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: fileId } }] }] },
    { 'anthropic-beta': 'files-api-2025-04-14' },
  );
  t.deepEqual(await shapeB(t, response), [200, { input_tokens: 1234, request_id: undefined }]);
  const [received] = upstream.received.slice(from);
  t.is(received?.path, '/v1/messages/count_tokens');
  t.like(received?.headers, { 'x-api-key': ANTHROPIC_PROVIDER_KEY, 'anthropic-version': '2023-06-01', 'anthropic-beta': 'files-api-2025-04-14' });
  t.deepEqual(received?.body, {
    model: 'claude-sonnet-4-5-20250929',
    messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: pdf.toString('base64') }, title: 'brief.pdf' }] }],
  });
});

test.serial('echo estimates the count: the words of the messages and the system prompt', async (t) => {
  const response = await count(await gateway.keyFor(['messages:create']), {
    model: 'echo-1',
    system: 'You are terse.',
    messages: [
      { role: 'user', content: 'How many words here?' },
      { role: 'assistant', content: [{ type: 'text', text: 'Some.' }] },
    ],
  });
  t.deepEqual(await shapeB(t, response), [200, { input_tokens: 8, request_id: undefined }]);
});

test.serial('the allowlist as on Messages: an unknown and a disallowed model get the same 404; a count is never streamed', async (t) => {
  const restricted = await gateway.keyFor(undefined, { models: ['claude-test'] });
  const userText = [{ role: 'user', content: 'hi' }];
  const notFound = [404, errorB('not_found_error', 'Model not found')];
  t.deepEqual(await shapeB(t, await count(restricted, { model: 'echo-1', messages: userText })), notFound);
  t.deepEqual(await shapeB(t, await count(await gateway.keyFor(), { model: 'no-such-model', messages: userText })), notFound);
  t.deepEqual(await shapeB(t, await count(await gateway.keyFor(['chat:completions']), { model: 'echo-1', messages: userText })), [
    403,
    errorB('permission_error', 'Forbidden'),
  ]);
  // A provider without a counting endpoint gets an estimate, made without calling it.
  const estimated = await count(await gateway.keyFor(), { model: 'gpt-test', messages: userText });
  t.is(estimated.status, 200);
  t.deepEqual(await estimated.json(), { input_tokens: 1 });
  t.deepEqual(await shapeB(t, await count(await gateway.keyFor(), { model: 'echo-1', messages: userText, stream: true })), [
    400,
    errorB('invalid_request_error', 'stream: Extra inputs are not permitted'),
  ]);
});

test.serial('every path under /v1/messages answers in Shape B with request-id, unknown ones 404 not_found_error', async (t) => {
  const key = await gateway.keyFor();
  const get = (path: string) => fetch(`${gateway.url}${path}`, { headers: { 'x-api-key': key } });
  t.deepEqual(await shapeB(t, await get('/v1/messages/batches')), [404, errorB('not_found_error', 'Unknown request URL: GET /v1/messages/batches')]);
  t.deepEqual(await shapeB(t, await get('/v1/messages/count_tokens')), [405, errorB('invalid_request_error', 'Method GET is not allowed on this URL')]);
  const unauthenticated = await fetch(`${gateway.url}/v1/messages/anything`, { method: 'POST' });
  t.deepEqual(await shapeB(t, unauthenticated), [401, errorB('authentication_error', 'Invalid API key')]);
});
