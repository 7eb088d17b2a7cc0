import { once } from 'node:events';
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import Anthropic from '@anthropic-ai/sdk';
import { ChatAnthropic } from '@langchain/anthropic';
import { ChatOpenAI, OpenAIEmbeddings } from '@langchain/openai';
import { embed, embedMany, generateText, streamText } from 'ai';
import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import OpenAI, { toFile } from 'openai';
import { makePdf } from '../helpers/models-pdf.js';
import { checkedFetch } from '../helpers/openapi.js';
import { referenceApp } from '../helpers/reference-app.js';

// The clients as their users write them, against the reference server (in this process) and a
// mock upstream on a loopback port. Every answer any client gets is checked against
// docs/openapi.json on the way (`checkedFetch`).

const test = anyTest as TestFn<{ problems: string[]; fetch: typeof fetch }>;

const UPSTREAM_TEXT = ['Hello from ', 'the upstream.'];
const upstreamRequests: Array<{ path: string; body: Record<string, unknown> }> = [];

/** The answer of a Responses upstream, in OpenAI's format: its own words, in the shape OpenAI gives. */
function upstreamResponse(status: string, text: string, usage: unknown) {
  const output =
    text === '' ? [] : [{ id: 'msg_up', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] }];
  return { id: 'resp_up', object: 'response', created_at: 1_760_000_000, status, model: 'gpt-upstream-2025', output, usage };
}

/** The vector the mock OpenAI gives an input: exact in float32, so that floats and base64 agree to the bit. */
const upstreamVector = (input: unknown, at: number) => [at + 0.5, JSON.stringify(input).length / 4, -1];

/** An embeddings answer of a mock OpenAI, as it encodes it: floats, or base64 of little-endian float32. */
function upstreamEmbeddings(body: Record<string, unknown>) {
  const inputs = Array.isArray(body.input) && typeof body.input[0] !== 'number' ? (body.input as unknown[]) : [body.input];
  const data = inputs.map((input, index) => {
    const vector = upstreamVector(input, index);
    const embedding = body.encoding_format === 'base64' ? Buffer.from(Float32Array.from(vector).buffer).toString('base64') : vector;
    return { object: 'embedding', index, embedding };
  });
  return { object: 'list', data, model: body.model, usage: { prompt_tokens: inputs.length * 2, total_tokens: inputs.length * 2 } };
}

const upstream = createServer(async (req: IncomingMessage, res) => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  upstreamRequests.push({ path: req.url ?? '', body });
  if (req.url === '/v1/embeddings') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(upstreamEmbeddings(body)));
    return;
  }
  if (req.url === '/v1/messages/count_tokens') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ input_tokens: 42 }));
    return;
  }
  const text = UPSTREAM_TEXT.join('');
  const usage = { input_tokens: 7, output_tokens: 5, total_tokens: 12 };
  if (body.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(upstreamResponse('completed', text, usage)));
    return;
  }
  const at = { item_id: 'msg_up', output_index: 0, content_index: 0 };
  const events = [
    { type: 'response.created', response: upstreamResponse('in_progress', '', null) },
    { type: 'response.output_item.added', output_index: 0, item: { id: 'msg_up', type: 'message', status: 'in_progress', role: 'assistant', content: [] } },
    { type: 'response.content_part.added', ...at, part: { type: 'output_text', text: '', annotations: [] } },
    ...UPSTREAM_TEXT.map((delta) => ({ type: 'response.output_text.delta', ...at, delta })),
    { type: 'response.output_text.done', ...at, text },
    { type: 'response.output_item.done', output_index: 0, item: upstreamResponse('completed', text, usage).output[0] },
    { type: 'response.completed', response: upstreamResponse('completed', text, usage) },
  ];
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const [index, event] of events.entries()) res.write(`event: ${event.type}\ndata: ${JSON.stringify({ ...event, sequence_number: index })}\n\n`);
  res.end();
});
upstream.listen(0, '127.0.0.1');
await once(upstream, 'listening');
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

const gateway = await referenceApp({
  providers: [
    { id: 'upstream-openai', kind: 'openai', baseURL: `${upstreamUrl}/v1` },
    { id: 'upstream-anthropic', kind: 'anthropic', baseURL: upstreamUrl },
  ],
  models: [
    { id: 'echo-1', provider: 'echo', created: 1_744_000_000, display_name: 'Echo One' },
    { id: 'echo-2', provider: 'echo', created: 1_744_000_000 },
    { id: 'gpt-mock', provider: 'upstream-openai', upstreamModel: 'gpt-upstream-2025', owned_by: 'openai' },
    { id: 'claude-mock', provider: 'upstream-anthropic', upstreamModel: 'claude-upstream-2025' },
    { id: 'echo-embed', provider: 'echo', type: 'embeddings' },
    { id: 'embed-mock', provider: 'upstream-openai', upstreamModel: 'text-embedding-upstream', type: 'embeddings' },
  ],
});
// Hooks after the top-level awaits: AVA wants every hook and test declared in one go.
test.after.always(async () => {
  await gateway.close();
  upstream.closeAllConnections();
  upstream.close();
});
test.beforeEach((t) => {
  t.context.problems = [];
  t.context.fetch = checkedFetch(t.context.problems);
});
test.afterEach((t) => t.deepEqual(t.context.problems, [], 'every answer agrees with docs/openapi.json'));

const key = await gateway.keyFor();
const REQUEST_ID = /^req_[A-Za-z0-9]{32}$/;
const pdf = makePdf(2, 300);

// As users write them: the OpenAI clients take the base URL with /v1, Anthropic's SDK and
// LangChain's ChatAnthropic without, the AI SDK's Anthropic provider with.
const openaiClient = (t: ExecutionContext<{ fetch: typeof fetch }>, apiKey = key) =>
  new OpenAI({ apiKey, baseURL: `${gateway.url}/v1`, maxRetries: 0, fetch: t.context.fetch });
const anthropicClient = (t: ExecutionContext<{ fetch: typeof fetch }>, apiKey = key) =>
  new Anthropic({ apiKey, baseURL: gateway.url, maxRetries: 0, fetch: t.context.fetch });

async function storedPdf(t: ExecutionContext<{ fetch: typeof fetch }>, name: string) {
  return (await openaiClient(t).files.create({ file: await toFile(pdf, name, { type: 'application/pdf' }), purpose: 'user_data' })).id;
}

const described = (name: string) => new RegExp(`Document 1: ${name.replace('.', '\\.')}, ${pdf.length} bytes, 2 pages\\.`);

test('openai SDK: responses.create with an input_file by file_id, whole and streamed', async (t) => {
  const client = openaiClient(t);
  const fileId = await storedPdf(t, 'lease.pdf');
  const input: OpenAI.Responses.ResponseInput = [
    {
      role: 'user',
      content: [
        { type: 'input_text', text: 'What is in it?' },
        { type: 'input_file', file_id: fileId },
      ],
    },
  ];
  const response = await client.responses.create({ model: 'echo-1', input });
  t.is(response.object, 'response');
  t.regex(response.output_text, described('lease.pdf'));
  t.true(response.output_text.startsWith('Echo from echo-1: received 1 message.'));
  t.like(response.usage, { input_tokens: 4 });

  const stream = await client.responses.create({ model: 'echo-1', input, stream: true });
  const types: string[] = [];
  let text = '';
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'response.output_text.delta') text += event.delta;
  }
  t.is(text, response.output_text);
  t.deepEqual([types[0], types[1], types.at(-1)], ['response.created', 'response.in_progress', 'response.completed']);

  const final = await client.responses.stream({ model: 'echo-1', input: 'Just text.' }).finalResponse();
  t.regex(final.output_text, /The last user message says: "Just text\."/);
});

test('openai SDK: responses streamed from an OpenAI upstream pass through; errors carry our request id', async (t) => {
  const client = openaiClient(t);
  let text = '';
  for await (const event of await client.responses.create({ model: 'gpt-mock', input: 'Hi', stream: true })) {
    if (event.type === 'response.output_text.delta') text += event.delta;
  }
  t.is(text, UPSTREAM_TEXT.join(''));
  t.like(upstreamRequests.findLast((request) => request.path === '/v1/responses')?.body, { model: 'gpt-upstream-2025', input: 'Hi', stream: true });

  const restricted = openaiClient(t, await gateway.keyFor(undefined, { models: ['echo-2'] }));
  const refused = await t.throwsAsync(restricted.responses.create({ model: 'echo-1', input: 'Hi' }), { instanceOf: OpenAI.PermissionDeniedError });
  t.is(refused?.message, "403 Model 'echo-1' is not allowed for this API key");
  t.regex(refused?.requestID ?? '', REQUEST_ID);
  // A model on an anthropic provider is translated to; what cannot be carried over is refused by name.
  const untranslatable = await t.throwsAsync(client.responses.create({ model: 'claude-mock', input: 'Hi', previous_response_id: 'resp_1' }), {
    instanceOf: OpenAI.BadRequestError,
  });
  t.regex(untranslatable?.message ?? '', /'previous_response_id'/);
  t.regex(untranslatable?.requestID ?? '', REQUEST_ID);
});

test('openai SDK: models.retrieve, for a model the key may use and one it may not', async (t) => {
  const model = await openaiClient(t).models.retrieve('gpt-mock');
  t.like(model, { id: 'gpt-mock', object: 'model', created: 0, owned_by: 'openai' });
  const restricted = openaiClient(t, await gateway.keyFor(undefined, { models: ['echo-1'] }));
  const missing = await t.throwsAsync(restricted.models.retrieve('gpt-mock'), { instanceOf: OpenAI.NotFoundError });
  t.is(missing?.code, 'model_not_found');
  t.regex(missing?.requestID ?? '', REQUEST_ID);
});

test('anthropic SDK: models.list pages in Anthropic shape, models.retrieve, and their 404', async (t) => {
  const client = anthropicClient(t);
  const page = await client.models.list({ limit: 3 });
  t.deepEqual(page.data[0], {
    type: 'model',
    id: 'echo-1',
    display_name: 'Echo One',
    created_at: '2025-04-07T04:26:40Z',
    max_input_tokens: null,
    max_tokens: null,
    lifecycle: 'active',
    deprecated_at: null,
    retires_at: null,
    capabilities: null,
    line: null,
  });
  t.true(page.has_more);
  const ids: string[] = [];
  for await (const model of client.models.list({ limit: 1 })) ids.push(model.id);
  t.deepEqual(ids, ['echo-1', 'echo-2', 'gpt-mock', 'claude-mock', 'echo-embed', 'embed-mock']);

  t.like(await client.models.retrieve('claude-mock'), { type: 'model', id: 'claude-mock', display_name: 'claude-mock', created_at: '1970-01-01T00:00:00Z' });
  const restricted = anthropicClient(t, await gateway.keyFor(undefined, { models: ['echo-1'] }));
  const missing = await t.throwsAsync(restricted.models.retrieve('claude-mock'), { instanceOf: Anthropic.NotFoundError });
  t.deepEqual(missing?.error, { type: 'error', error: { type: 'not_found_error', message: 'Model not found' }, request_id: missing?.requestID });
});

test('anthropic SDK: messages.countTokens, estimated by echo and forwarded to an Anthropic upstream', async (t) => {
  const client = anthropicClient(t);
  const estimated = await client.messages.countTokens({
    model: 'echo-2',
    system: 'Be brief.',
    messages: [{ role: 'user', content: 'Count these four words.' }],
  });
  t.deepEqual(estimated, { input_tokens: 6 });
  const fileId = await storedPdf(t, 'contract.pdf');
  const counted = await client.messages.countTokens({
    model: 'claude-mock',
    messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: fileId } }] }],
  });
  t.deepEqual(counted, { input_tokens: 42 });
  const forwarded = upstreamRequests.findLast((request) => request.path === '/v1/messages/count_tokens');
  t.like(forwarded?.body, {
    model: 'claude-upstream-2025',
    messages: [{ content: [{ type: 'document', source: { type: 'base64', data: pdf.toString('base64') } }] }],
  });

  const restricted = anthropicClient(t, await gateway.keyFor(undefined, { models: ['echo-1'] }));
  const missing = await t.throwsAsync(restricted.messages.countTokens({ model: 'claude-mock', messages: [{ role: 'user', content: 'hi' }] }), {
    instanceOf: Anthropic.NotFoundError,
  });
  t.regex(missing?.requestID ?? '', REQUEST_ID);
});

test('anthropic SDK: beta.files as docs/CLIENTS.md shows it; its file reaches an Anthropic upstream and the echo model, whole and streamed', async (t) => {
  const client = anthropicClient(t);
  const sample = await readFile('examples/sample.pdf');
  const doc = await client.beta.files.upload({ file: createReadStream('examples/sample.pdf'), expires_in_seconds: 86400 });
  t.like(doc, { type: 'file', filename: 'sample.pdf', mime_type: 'application/pdf', size_bytes: sample.length, downloadable: true });
  t.is(Date.parse(doc.expires_at ?? '') - Date.parse(doc.created_at), 86_400_000);

  const content: Anthropic.MessageParam['content'] = [
    { type: 'document', source: { type: 'file', file_id: doc.id } },
    { type: 'text', text: 'Summarise.' },
  ];
  const whole = await client.messages.create({ model: 'echo-2', max_tokens: 100, messages: [{ role: 'user', content }] });
  t.regex(whole.content[0]?.type === 'text' ? whole.content[0].text : '', new RegExp(`Document 1: sample\\.pdf, ${sample.length} bytes`));
  const streamed = await client.messages.stream({ model: 'echo-2', max_tokens: 100, messages: [{ role: 'user', content }] }).finalMessage();
  t.deepEqual(streamed.content, whole.content);
  await client.messages.countTokens({ model: 'claude-mock', messages: [{ role: 'user', content }] });
  // Tests run concurrently: the request that carried this file, found by its bytes.
  const forwarded = upstreamRequests.find(
    (request) => request.path === '/v1/messages/count_tokens' && JSON.stringify(request.body).includes(sample.toString('base64')),
  );
  t.like(forwarded?.body, {
    model: 'claude-upstream-2025',
    messages: [{ content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: sample.toString('base64') } }] }],
  });

  const listed: string[] = [];
  for await (const stored of client.beta.files.list({ limit: 20 })) listed.push(stored.id);
  t.true(listed.includes(doc.id));
  const viaOpenAI = await storedPdf(t, 'from-openai.pdf');
  t.like(await client.beta.files.retrieveMetadata(viaOpenAI), { filename: 'from-openai.pdf', size_bytes: pdf.length });
  t.deepEqual(Buffer.from(await (await client.beta.files.download(doc.id)).arrayBuffer()), sample);
  t.deepEqual(await client.beta.files.delete(doc.id), { id: doc.id, type: 'file_deleted' });
});

test('AI SDK: the default OpenAI provider (Responses) with a stored PDF, generateText and streamText', async (t) => {
  const openai = createOpenAI({ baseURL: `${gateway.url}/v1`, apiKey: key, fetch: t.context.fetch });
  const fileId = await storedPdf(t, 'memo.pdf');
  const { text } = await generateText({
    model: openai('echo-1'),
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Summarise.' },
          { type: 'file', data: fileId, mediaType: 'application/pdf' },
        ],
      },
    ],
  });
  t.regex(text, described('memo.pdf'));
  const streamed = streamText({ model: openai('gpt-mock'), prompt: 'Hi' });
  t.is(await streamed.text, UPSTREAM_TEXT.join(''));
  t.like(await streamed.usage, { inputTokens: 7, outputTokens: 5 });
});

test('AI SDK: the Anthropic provider, generateText', async (t) => {
  const anthropic = createAnthropic({ baseURL: `${gateway.url}/v1`, apiKey: key, fetch: t.context.fetch });
  const { text } = await generateText({ model: anthropic('echo-2'), maxOutputTokens: 100, prompt: 'Hello there' });
  t.is(text, 'Echo from echo-2: received 1 message.\nThe last user message says: "Hello there"\nNo documents are attached.');
});

test('LangChain: ChatOpenAI on the Responses API, invoke and stream', async (t) => {
  const model = new ChatOpenAI({
    model: 'echo-1',
    apiKey: key,
    useResponsesApi: true,
    maxRetries: 0,
    configuration: { baseURL: `${gateway.url}/v1`, fetch: t.context.fetch },
  });
  const answer = await model.invoke('Hello from LangChain');
  t.regex(answer.text, /The last user message says: "Hello from LangChain"/);
  let streamed = '';
  for await (const chunk of await model.stream('Stream it')) streamed += chunk.text;
  t.regex(streamed, /The last user message says: "Stream it"/);
});

test('LangChain: ChatAnthropic, invoke', async (t) => {
  const model = new ChatAnthropic({ model: 'echo-2', apiKey: key, anthropicApiUrl: gateway.url, maxRetries: 0, clientOptions: { fetch: t.context.fetch } });
  const answer = await model.invoke('Hello from LangChain');
  t.regex(answer.text, /^Echo from echo-2: received 1 message\./);
});

const TEXTS = ['first text', 'second, longer text'];

test('openai SDK: embeddings.create, its default base64 and encoding_format "float" give the same vectors, from echo and from an OpenAI upstream', async (t) => {
  const client = openaiClient(t);
  for (const model of ['echo-embed', 'embed-mock']) {
    const decoded = await client.embeddings.create({ model, input: TEXTS });
    const floats = await client.embeddings.create({ model, input: TEXTS, encoding_format: 'float' });
    t.like(decoded, { object: 'list', model, usage: { prompt_tokens: model === 'echo-embed' ? 5 : 4 } });
    t.deepEqual(decoded.data, floats.data, model);
    t.is(decoded.data.length, 2);
  }
  // The SDK's body passes as it is (the other tests' calls reach the same upstream meanwhile).
  for (const encoding_format of ['base64', 'float']) {
    const sent = { model: 'text-embedding-upstream', input: TEXTS, encoding_format };
    t.true(
      upstreamRequests.some((request) => request.path === '/v1/embeddings' && isDeepStrictEqual(request.body, sent)),
      encoding_format,
    );
  }
  t.deepEqual((await client.embeddings.create({ model: 'embed-mock', input: 'one' })).data[0]?.embedding, upstreamVector('one', 0));
  t.is((await client.embeddings.create({ model: 'echo-embed', input: 'one', dimensions: 32 })).data[0]?.embedding.length, 32);
  const wrong = await t.throwsAsync(client.embeddings.create({ model: 'echo-1', input: 'one' }), { instanceOf: OpenAI.BadRequestError });
  t.regex(wrong?.message ?? '', /'echo-1' is not an embeddings model/);
});

test("AI SDK: embed and embedMany with the OpenAI provider's embedding model", async (t) => {
  const openai = createOpenAI({ baseURL: `${gateway.url}/v1`, apiKey: key, fetch: t.context.fetch });
  const direct = await openaiClient(t).embeddings.create({ model: 'echo-embed', input: TEXTS, encoding_format: 'float' });
  const one = await embed({ model: openai.embedding('echo-embed'), value: TEXTS[0] as string, maxRetries: 0 });
  t.deepEqual(one.embedding, direct.data[0]?.embedding);
  const many = await embedMany({ model: openai.embedding('embed-mock'), values: TEXTS, maxRetries: 0 });
  t.deepEqual(many.embeddings, TEXTS.map(upstreamVector));
  t.is(many.usage.tokens, 4);
});

test('LangChain: OpenAIEmbeddings, embedQuery and embedDocuments', async (t) => {
  const direct = await openaiClient(t).embeddings.create({ model: 'echo-embed', input: TEXTS, encoding_format: 'float' });
  const embeddings = (model: string) =>
    new OpenAIEmbeddings({ model, apiKey: key, maxRetries: 0, configuration: { baseURL: `${gateway.url}/v1`, fetch: t.context.fetch } });
  t.deepEqual(
    await embeddings('echo-embed').embedDocuments(TEXTS),
    direct.data.map((item) => item.embedding),
  );
  t.deepEqual(await embeddings('embed-mock').embedQuery('one'), upstreamVector('one', 0));
});
