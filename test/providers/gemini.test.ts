import { Readable } from 'node:stream';
import Anthropic from '@anthropic-ai/sdk';
import test from 'ava';
import OpenAI from 'openai';
import { priceCatalog } from '../../lib/cost/price-table.js';
import { geminiProvider } from '../../lib/models/providers/gemini/index.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { modelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { reply, replyEvents, scriptedUpstream } from '../helpers/models-upstream.js';
import { until } from '../helpers/poll.js';

// The gemini kind against a mock of Google AI Studio's API, its answers and events written as the
// published reference (ai.google.dev/api/generate-content) gives them: every client format, JSON
// and streamed, tools, PDFs, thought signatures carried back, errors, usage and cost.

const API_KEY = 'gemini-provider-secret';
const MODEL = 'gemini-2.5-flash';
const GENERATE = `/v1beta/models/${MODEL}:generateContent`;
const STREAM = `/v1beta/models/${MODEL}:streamGenerateContent?alt=sse`;
const EMBED = '/v1beta/models/gemini-embedding-001:batchEmbedContents';

const upstream = await scriptedUpstream();
const records: UsageRecord[] = [];
const gateway = await modelsApp({
  catalog: [
    { id: 'gemini', provider: 'google', upstreamModel: MODEL, price: { input: 0.3, output: 2.5, cacheRead: 0.075 } },
    { id: 'gemini-embed', provider: 'google', upstreamModel: 'gemini-embedding-001', type: 'embeddings' },
  ],
  providers: [geminiProvider({ id: 'google', baseURL: upstream.url, apiKey: API_KEY })],
  usageRecorder: { record: (record) => records.push(record) },
});
test.after.always(() => Promise.all([gateway.close(), upstream.close()]));
test.beforeEach(() => {
  upstream.received.splice(0);
  records.splice(0);
});
const key = await gateway.keyFor();

// Gemini's usage: the prompt (cached content included), the candidates, the thoughts apart.
const USAGE_METADATA = { promptTokenCount: 12, candidatesTokenCount: 5, thoughtsTokenCount: 3, cachedContentTokenCount: 4, totalTokenCount: 20 };
const answer = (parts: unknown[], finishReason = 'STOP') => ({
  candidates: [{ content: { role: 'model', parts }, finishReason, index: 0 }],
  usageMetadata: USAGE_METADATA,
  modelVersion: MODEL,
  responseId: 'resp-gemini-1',
});
const sse = (data: unknown) => `data: ${JSON.stringify(data)}\r\n\r\n`;
const chunks = (...data: unknown[]) => replyEvents(Readable.from(data.map(sse)));
const textChunks = () =>
  chunks(
    {
      candidates: [{ content: { role: 'model', parts: [{ text: 'Hel' }] }, index: 0 }],
      usageMetadata: { promptTokenCount: 12 },
      modelVersion: MODEL,
      responseId: 'r1',
    },
    {
      candidates: [{ content: { role: 'model', parts: [{ text: 'lo.' }] }, finishReason: 'STOP', index: 0 }],
      usageMetadata: USAGE_METADATA,
      modelVersion: MODEL,
    },
  );

// biome-ignore lint/suspicious/noExplicitAny: the wire's JSON, read field by field
type Json = Record<string, any>;
const CLIENTS = {
  chat: (body: Json = {}) =>
    gateway.post('/v1/chat/completions', { model: 'gemini', messages: [{ role: 'user', content: 'hi' }], ...body }, { authorization: `Bearer ${key}` }),
  responses: (body: Json = {}) => gateway.post('/v1/responses', { model: 'gemini', input: 'hi', ...body }, { authorization: `Bearer ${key}` }),
  messages: (body: Json = {}) =>
    gateway.post('/v1/messages', { model: 'gemini', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }], ...body }, { 'x-api-key': key }),
};
const SYSTEM = {
  chat: {
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'hi' },
    ],
  },
  responses: { instructions: 'Be brief.' },
  messages: { system: 'Be brief.' },
};
const textOf = {
  chat: (body: Json) => body.choices[0].message.content,
  responses: (body: Json) => body.output.find((item: Json) => item.type === 'message').content[0].text,
  messages: (body: Json) => body.content.find((block: Json) => block.type === 'text').text,
};
const lastRecord = async () =>
  (
    await until(
      async () => records,
      (all) => all.length > 0,
    )
  ).at(-1);

for (const [name, send] of Object.entries(CLIENTS) as Array<[keyof typeof CLIENTS, (typeof CLIENTS)['chat']]>) {
  test.serial(
    `${name}: a JSON answer from Gemini, the system prompt as systemInstruction, the provider's key sent, the usage with thoughts counted`,
    async (t) => {
      upstream.answer(GENERATE, reply(200, answer([{ text: 'Hello.' }])));
      const response = await send(SYSTEM[name]);
      t.is(response.status, 200);
      const body = (await response.json()) as Json;
      t.is(textOf[name](body), 'Hello.');
      t.is(body.model, 'gemini');
      const [sent] = upstream.received;
      t.is(sent?.path, GENERATE);
      t.is(sent?.headers['x-goog-api-key'], API_KEY);
      t.false(JSON.stringify(sent).includes(key));
      t.deepEqual(sent?.body.systemInstruction, { parts: [{ text: 'Be brief.' }] });
      t.deepEqual(sent?.body.contents, [{ role: 'user', parts: [{ text: 'hi' }] }]);
      t.like(await lastRecord(), { provider: 'google', inputTokens: 12, outputTokens: 8 });
    },
  );

  test.serial(`${name}: a Gemini stream reaches the client event by event, whole, with its usage`, async (t) => {
    upstream.answer(STREAM, textChunks());
    const response = await send({ stream: true });
    t.is(response.status, 200);
    const text = await response.text();
    t.true(text.includes('Hel') && text.includes('lo.'));
    t.is(upstream.received[0]?.path, STREAM);
    t.like(await lastRecord(), { stream: true, inputTokens: 12, outputTokens: 8 });
  });

  test.serial(`${name}: an error chunk mid-stream ends the client's stream in its error event`, async (t) => {
    upstream.answer(
      STREAM,
      chunks(
        { candidates: [{ content: { role: 'model', parts: [{ text: 'Hel' }] }, index: 0 }], modelVersion: MODEL },
        { error: { code: 503, message: 'The model is overloaded.', status: 'UNAVAILABLE' } },
      ),
    );
    const text = await (await send({ stream: true })).text();
    t.true(text.includes('Hel'));
    t.regex(text, name === 'chat' ? /^data: \{"error":/m : name === 'messages' ? /^event: error$/m : /^event: (error|response\.failed)$/m);
    t.false(text.includes('overloaded.'));
  });
}

test.serial('a 429 RESOURCE_EXHAUSTED is a 429 with its message and the retry delay of its RetryInfo as retry-after', async (t) => {
  upstream.answer(
    GENERATE,
    reply(429, {
      error: {
        code: 429,
        message: 'Resource has been exhausted (e.g. check quota).',
        status: 'RESOURCE_EXHAUSTED',
        details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '6.5s' }],
      },
    }),
  );
  const response = await CLIENTS.chat();
  t.is(response.status, 429);
  t.is(response.headers.get('retry-after'), '7');
  t.like(await response.json(), { error: { message: 'Resource has been exhausted (e.g. check quota).' } });
});

test.serial("a key Gemini refuses (400 API_KEY_INVALID) is the gateway's failure, a 502, not the client's", async (t) => {
  upstream.answer(
    GENERATE,
    reply(400, {
      error: {
        code: 400,
        message: 'API key not valid. Please pass a valid API key.',
        status: 'INVALID_ARGUMENT',
        details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' }],
      },
    }),
  );
  t.is((await CLIENTS.messages()).status, 502);
});

const weatherTool = {
  type: 'function',
  function: {
    name: 'weather',
    description: 'The weather in a city',
    parameters: {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      properties: { city: { type: 'string' }, unit: { type: ['string', 'null'], enum: ['c', 'f'] }, when: { const: 'now' } },
      required: ['city'],
      additionalProperties: false,
    },
  },
};

test.serial(
  'a Chat Completions tool loop: schemas in Gemini’s subset, parallel calls, the thought signature back in the call id, results in order',
  async (t) => {
    upstream.answer(
      GENERATE,
      reply(
        200,
        answer([
          { functionCall: { name: 'weather', args: { city: 'Paris' } }, thoughtSignature: 'c2ln+/+/Pn8=' },
          { functionCall: { name: 'weather', args: { city: 'Rome' } } },
        ]),
      ),
    );
    const first = await CLIENTS.chat({ tools: [weatherTool], tool_choice: 'required' });
    const body = (await first.json()) as Json;
    t.is(body.choices[0].finish_reason, 'tool_calls');
    const calls = body.choices[0].message.tool_calls as Array<{ id: string; function: { name: string; arguments: string } }>;
    // Ids any provider takes back, were the conversation to go on on another model.
    t.true(calls.every((call) => /^[\w-]+$/.test(call.id)));
    t.deepEqual(
      calls.map((call) => call.function.arguments),
      ['{"city":"Paris"}', '{"city":"Rome"}'],
    );
    const sent = upstream.received[0]?.body as Json;
    t.deepEqual(sent.tools, [
      {
        functionDeclarations: [
          {
            name: 'weather',
            description: 'The weather in a city',
            parameters: {
              type: 'object',
              properties: { city: { type: 'string' }, unit: { type: 'string', nullable: true, enum: ['c', 'f'] }, when: { enum: ['now'] } },
              required: ['city'],
            },
          },
        ],
      },
    ]);
    t.deepEqual(sent.toolConfig, { functionCallingConfig: { mode: 'ANY' } });

    // The client sends back what it got: the calls' ids, names and arguments, and the results.
    upstream.answer(GENERATE, reply(200, answer([{ text: 'Sunny in both.' }])));
    const second = await CLIENTS.chat({
      tools: [weatherTool],
      messages: [
        { role: 'user', content: 'Weather in Paris and Rome?' },
        { role: 'assistant', content: null, tool_calls: calls.map(({ id, function: fn }) => ({ id, type: 'function', function: fn })) },
        { role: 'tool', tool_call_id: calls[0]?.id, content: '18C' },
        { role: 'tool', tool_call_id: calls[1]?.id, content: '24C' },
      ],
    });
    t.is(second.status, 200);
    t.deepEqual((upstream.received[1]!.body as Json).contents.slice(1), [
      {
        role: 'model',
        parts: [
          { functionCall: { name: 'weather', args: { city: 'Paris' } }, thoughtSignature: 'c2ln+/+/Pn8=' },
          { functionCall: { name: 'weather', args: { city: 'Rome' } } },
        ],
      },
      {
        role: 'user',
        parts: [{ functionResponse: { name: 'weather', response: { output: '18C' } } }, { functionResponse: { name: 'weather', response: { output: '24C' } } }],
      },
    ]);
  },
);

test.serial('a Messages client gets thinking with its signature, and its next turn gives Gemini the signature back on its part', async (t) => {
  upstream.answer(
    GENERATE,
    reply(
      200,
      answer([
        { text: 'Let me think about it.', thought: true },
        { text: '42.', thoughtSignature: 'dGhvdWdodA==' },
      ]),
    ),
  );
  const first = await CLIENTS.messages({ thinking: { type: 'enabled', budget_tokens: 2048 } });
  const content = ((await first.json()) as { content: Json[] }).content;
  t.deepEqual(content, [
    { type: 'thinking', thinking: 'Let me think about it.', signature: 'dGhvdWdodA==' },
    { type: 'text', text: '42.' },
  ]);
  t.deepEqual((upstream.received[0]!.body as Json).generationConfig.thinkingConfig, { thinkingBudget: 2048, includeThoughts: true });

  upstream.answer(GENERATE, reply(200, answer([{ text: 'Yes.' }])));
  await CLIENTS.messages({
    thinking: { type: 'enabled', budget_tokens: 2048 },
    messages: [
      { role: 'user', content: 'The answer?' },
      { role: 'assistant', content },
      { role: 'user', content: 'Sure?' },
    ],
  });
  t.deepEqual((upstream.received[1]!.body as Json).contents[1], { role: 'model', parts: [{ text: '42.', thoughtSignature: 'dGhvdWdodA==' }] });
});

test.serial('a streamed function call reaches a Responses client as a function call item', async (t) => {
  upstream.answer(
    STREAM,
    chunks({
      candidates: [{ content: { role: 'model', parts: [{ functionCall: { name: 'weather', args: { city: 'Oslo' } } }] }, finishReason: 'STOP', index: 0 }],
      usageMetadata: USAGE_METADATA,
      modelVersion: MODEL,
    }),
  );
  const text = await (
    await CLIENTS.responses({
      stream: true,
      tools: [{ type: 'function', name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }],
    })
  ).text();
  t.regex(text, /"type":"function_call"/);
  t.regex(text, /\{\\"city\\":\\"Oslo\\"\}/);
  t.regex(text, /event: response\.completed/);
});

test.serial('a PDF reaches Gemini inline, and a JSON schema answer as responseMimeType and responseSchema', async (t) => {
  upstream.answer(GENERATE, reply(200, answer([{ text: '{"pages":2}' }])));
  const pdf = makePdf(2).toString('base64');
  const response = await CLIENTS.chat({
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Pages?' },
          { type: 'file', file: { filename: 'a.pdf', file_data: `data:application/pdf;base64,${pdf}` } },
        ],
      },
    ],
    response_format: {
      type: 'json_schema',
      json_schema: { name: 'pages', strict: true, schema: { type: 'object', properties: { pages: { type: 'integer' } }, additionalProperties: false } },
    },
  });
  t.is(response.status, 200);
  const sent = upstream.received[0]?.body as Json;
  t.deepEqual(sent.contents[0].parts[1], { inlineData: { mimeType: 'application/pdf', data: pdf } });
  t.deepEqual(sent.generationConfig, { responseMimeType: 'application/json', responseSchema: { type: 'object', properties: { pages: { type: 'integer' } } } });
});

test.serial('a schema keyword Gemini has no equivalent for is refused by name, and nothing is sent', async (t) => {
  const tool = { type: 'function', function: { name: 'pick', parameters: { type: 'object', properties: { n: { type: 'integer', exclusiveMinimum: 0 } } } } };
  const response = await CLIENTS.chat({ tools: [tool] });
  t.is(response.status, 400);
  t.regex(((await response.json()) as { error: { message: string } }).error.message, /tools\[0\] \(pick\) schema\.properties\.n\.exclusiveMinimum.*Gemini/);
  t.is(upstream.received.length, 0);
});

test.serial('embeddings by batchEmbedContents, 100 texts a call, joined in order, as floats and as base64', async (t) => {
  const vectors = (from: number, count: number) => ({ embeddings: Array.from({ length: count }, (_, index) => ({ values: [from + index, 0.5] })) });
  upstream.answer(EMBED, reply(200, vectors(0, 100)));
  upstream.answer(EMBED, reply(200, vectors(100, 50)));
  const input = Array.from({ length: 150 }, (_, index) => `text ${index}`);
  const response = await gateway.post('/v1/embeddings', { model: 'gemini-embed', input, dimensions: 2 }, { authorization: `Bearer ${key}` });
  t.is(response.status, 200);
  const body = (await response.json()) as { data: Array<{ index: number; embedding: number[] }> };
  t.deepEqual(body.data[120], { object: 'embedding', index: 120, embedding: [120, 0.5] });
  const [firstCall, secondCall] = upstream.received.map((request) => request.body as Json);
  t.is(firstCall?.requests.length, 100);
  t.deepEqual(secondCall?.requests[0], { model: 'models/gemini-embedding-001', content: { parts: [{ text: 'text 100' }] }, outputDimensionality: 2 });

  upstream.answer(EMBED, reply(200, vectors(7, 1)));
  const base64 = await gateway.post('/v1/embeddings', { model: 'gemini-embed', input: 'x', encoding_format: 'base64' }, { authorization: `Bearer ${key}` });
  const [item] = ((await base64.json()) as { data: Array<{ embedding: string }> }).data;
  const bytes = Buffer.from(item?.embedding ?? '', 'base64');
  t.deepEqual([bytes.readFloatLE(0), bytes.readFloatLE(4)], [7, 0.5]);
});

test.serial("a Gemini model's price comes from the maintained table, and a call costs its tokens", async (t) => {
  const { models, unpriced } = await priceCatalog([{ id: 'flash', provider: 'google', upstreamModel: MODEL }]);
  t.deepEqual(unpriced, []);
  t.true(((models[0] as { price?: { input: number } }).price?.input ?? 0) > 0);
  upstream.answer(GENERATE, reply(200, answer([{ text: 'Hi.' }])));
  await CLIENTS.chat();
  // 8 new input tokens at $0.30, 4 cached at $0.075, 8 output (thoughts included) at $2.50, per million.
  t.like(await lastRecord(), { costPicoUsd: 8 * 300_000 + 4 * 75_000 + 8 * 2_500_000 });
});

test.serial('the openai SDK streams a Gemini answer through Chat Completions, and the anthropic SDK through Messages', async (t) => {
  upstream.answer(STREAM, textChunks());
  const openai = new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  const stream = await openai.chat.completions.create({
    model: 'gemini',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage: unknown;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? '';
    usage ??= chunk.usage ?? undefined;
  }
  t.is(text, 'Hello.');
  t.like(usage, { prompt_tokens: 12, completion_tokens: 8 });

  upstream.answer(STREAM, textChunks());
  const anthropic = new Anthropic({ apiKey: key, baseURL: gateway.url, maxRetries: 0 });
  const message = await anthropic.messages.stream({ model: 'gemini', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
  t.is(message.content.map((block) => (block.type === 'text' ? block.text : '')).join(''), 'Hello.');
  // Messages counts cache reads apart from the input.
  t.like(message.usage, { input_tokens: 8, cache_read_input_tokens: 4, output_tokens: 8 });
});

test.serial('hints Gemini has no place for are left out and named; what would change the answer is refused by name', async (t) => {
  upstream.answer(GENERATE, reply(200, answer([{ text: 'Hi.' }])));
  const hinted = await CLIENTS.chat({ user: 'end-user-1', prompt_cache_key: 'k1', service_tier: 'auto' });
  t.is(hinted.status, 200);
  t.is(hinted.headers.get('x-kmg-omitted'), 'service_tier,user,prompt_cache_key');
  t.false(JSON.stringify(upstream.received[0]?.body).includes('end-user-1'));
  for (const [field, value] of [
    ['parallel_tool_calls', false],
    ['verbosity', 'low'],
    ['service_tier', 'flex'],
  ] as const) {
    const refused = await CLIENTS.chat({ [field]: value, tools: [weatherTool] });
    t.is(refused.status, 400, field);
    t.regex(((await refused.json()) as { error: { message: string } }).error.message, new RegExp(`'${field}.*Gemini`));
  }
  t.is(upstream.received.length, 1);
});

test.serial("a Responses client's reasoning item goes back to Gemini as its signature", async (t) => {
  upstream.answer(
    GENERATE,
    reply(
      200,
      answer([
        { text: 'Thinking.', thought: true },
        { text: 'Done.', thoughtSignature: 'cmVzcG9uc2Vz' },
      ]),
    ),
  );
  const first = (await (await CLIENTS.responses({ reasoning: { effort: 'low' } })).json()) as { output: Json[] };
  const reasoning = first.output.find((item) => item.type === 'reasoning');
  t.is(reasoning?.encrypted_content, 'cmVzcG9uc2Vz');
  t.deepEqual((upstream.received[0]!.body as Json).generationConfig.thinkingConfig, { thinkingBudget: 2048, includeThoughts: true });
  upstream.answer(GENERATE, reply(200, answer([{ text: 'Again.' }])));
  const input = [{ role: 'user', content: 'Go' }, ...first.output, { role: 'user', content: 'More' }];
  t.is((await CLIENTS.responses({ reasoning: { effort: 'low' }, input })).status, 200);
  t.deepEqual((upstream.received[1]!.body as Json).contents[1], { role: 'model', parts: [{ text: 'Done.', thoughtSignature: 'cmVzcG9uc2Vz' }] });
});

test.serial('an attached file id reaches Gemini as the PDF inline, from a Messages client', async (t) => {
  const pdf = makePdf(3);
  const fileId = await gateway.storePdf(pdf);
  upstream.answer(GENERATE, reply(200, answer([{ text: 'Three pages.' }])));
  const response = await CLIENTS.messages({
    messages: [
      {
        role: 'user',
        content: [
          { type: 'document', source: { type: 'file', file_id: fileId } },
          { type: 'text', text: 'Pages?' },
        ],
      },
    ],
  });
  t.is(response.status, 200);
  t.deepEqual((upstream.received[0]!.body as Json).contents[0].parts[0], { inlineData: { mimeType: 'application/pdf', data: pdf.toString('base64') } });
});
