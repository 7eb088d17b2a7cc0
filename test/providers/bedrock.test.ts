import { Readable } from 'node:stream';
import Anthropic from '@anthropic-ai/sdk';
import test from 'ava';
import OpenAI from 'openai';
import { priceCatalog } from '../../lib/cost/price-table.js';
import type { CatalogModel } from '../../lib/models/catalog.js';
import type { CooldownStore } from '../../lib/models/routing/cooldown-store.js';
import { chatCompletionsFormat } from '../../lib/models/formats/chat-completions/index.js';
import { messagesFormat } from '../../lib/models/formats/messages/index.js';
import type { StreamPart } from '../../lib/models/formats/neutral.js';
import { ConverseStreamReader } from '../../lib/models/providers/bedrock/converse-stream.js';
import { CONVERSE, FROM_STOP_REASON, readConverseAnswer, toolUseId, writeConverseRequest } from '../../lib/models/providers/bedrock/converse.js';
import { loadAws } from '../../lib/models/providers/bedrock/aws.js';
import { bedrockProvider } from '../../lib/models/providers/bedrock/index.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { bedrockMock, converseAnswer, frame, MOCK_CREDENTIALS, MOCK_REGION, textStream, type StreamMessage } from '../helpers/bedrock-mock.js';
import { modelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';
import { until } from '../helpers/poll.js';

// Bedrock's Converse API: the mapping of the neutral representation (request, answer, stream),
// then the provider against a mock of Bedrock built from its published reference.

// biome-ignore lint/suspicious/noExplicitAny: the wire's JSON, read field by field
type Json = Record<string, any>;
const PDF = Buffer.from('%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n').toString('base64');
const readChat = (body: Record<string, unknown>) => chatCompletionsFormat.translation.client.readRequest({ model: 'm', ...body }, CONVERSE);
const readMessages = (body: Record<string, unknown>) => messagesFormat.translation.client.readRequest({ model: 'm', max_tokens: 100, ...body }, CONVERSE);

// The provider against the mock, behind the models router.

process.env.KMG_TEST_BEDROCK_KEY_ID = MOCK_CREDENTIALS.accessKeyId;
process.env.KMG_TEST_BEDROCK_SECRET = MOCK_CREDENTIALS.secretAccessKey;
const mock = await bedrockMock();
const provider = (id: string, secretAccessKeyEnv = 'KMG_TEST_BEDROCK_SECRET') =>
  bedrockProvider({ id, region: MOCK_REGION, baseURL: mock.url, accessKeyIdEnv: 'KMG_TEST_BEDROCK_KEY_ID', secretAccessKeyEnv });
process.env.KMG_TEST_BEDROCK_WRONG = 'not-the-secret';
process.env.AWS_ACCESS_KEY_ID = MOCK_CREDENTIALS.accessKeyId;
process.env.AWS_SECRET_ACCESS_KEY = MOCK_CREDENTIALS.secretAccessKey;
const SONNET = 'anthropic.claude-sonnet-4-5-20250929-v1:0';
const PROFILE_ARN = 'arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3';
const { models: catalog } = await priceCatalog<CatalogModel>([
  // Priced from the maintained table, as Bedrock's own model id.
  { id: 'claude-bedrock', provider: 'bedrock', upstreamModel: SONNET },
  { id: 'profile', provider: 'bedrock', upstreamModel: PROFILE_ARN, price: { input: 1, output: 1 } },
  {
    id: 'routed',
    deployments: [
      { provider: 'bedrock', upstreamModel: 'first' },
      { provider: 'bedrock-spare', upstreamModel: 'second' },
    ],
    price: { input: 1, output: 1 },
  },
  { id: 'unsigned', provider: 'bedrock-wrong-secret', upstreamModel: SONNET },
  { id: 'titan', provider: 'bedrock', upstreamModel: 'amazon.titan-embed-text-v2:0', type: 'embeddings', price: { input: 0.02, output: 0 } },
  { id: 'cohere-embed', provider: 'bedrock', upstreamModel: 'cohere.embed-multilingual-v3', type: 'embeddings', price: { input: 0.1, output: 0 } },
  { id: 'default-chain', provider: 'bedrock-default-chain', upstreamModel: SONNET, price: { input: 1, output: 1 } },
]);
const records: UsageRecord[] = [];
/** The deployments that failed in a way that cools them down, and the retry-after each said. */
const cooled: Array<{ deployment: string; retryAfterMs: number | undefined }> = [];
const cooldowns: CooldownStore = {
  fail: async (deployment, _policy, _nowMs, retryAfterMs) => {
    cooled.push({ deployment, retryAfterMs });
    return null;
  },
  coolingUntil: async (deployments) => deployments.map(() => null),
};
const gateway = await modelsApp({
  catalog,
  providers: [
    provider('bedrock'),
    provider('bedrock-spare'),
    provider('bedrock-wrong-secret', 'KMG_TEST_BEDROCK_WRONG'),
    // No variables named: AWS's default chain, which reads AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY first.
    bedrockProvider({ id: 'bedrock-default-chain', region: MOCK_REGION, baseURL: mock.url }),
  ],
  usageRecorder: { record: (record) => void records.push(record) },
  routing: { maxAttempts: 2, random: () => 0, sleep: async () => {}, cooldown: { store: cooldowns } },
});
test.after.always(() => Promise.all([gateway.close(), mock.close()]));
const key = await gateway.keyFor();

type Format = 'chat' | 'responses' | 'messages';
const FORMATS: Format[] = ['chat', 'responses', 'messages'];
const PATHS: Record<Format, string> = { chat: '/v1/chat/completions', responses: '/v1/responses', messages: '/v1/messages' };
const HEADERS: Record<Format, Record<string, string>> = {
  chat: { authorization: `Bearer ${key}` },
  responses: { authorization: `Bearer ${key}` },
  messages: { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
};
/** A call of `format` to `model` saying `text`, with `extra` fields. */
function body(format: Format, model: string, text: string, extra: Record<string, unknown> = {}) {
  if (format === 'responses') return { model, input: text, instructions: 'Be brief.', ...extra };
  if (format === 'messages') return { model, max_tokens: 300, system: 'Be brief.', messages: [{ role: 'user', content: text }], ...extra };
  return {
    model,
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: text },
    ],
    ...extra,
  };
}
const call = async (format: Format, payload: Record<string, unknown>) => {
  const res = await gateway.post(PATHS[format], payload, HEADERS[format]);
  return { status: res.status, headers: res.headers, text: await res.text() };
};
/** The data of each server-sent event, parsed, with its event name. */
const events = (text: string) =>
  text
    .split('\n\n')
    .filter((event) => /^data: /m.test(event))
    .map((event) => {
      const data = /^data: (.*)$/m.exec(event)?.[1] ?? '';
      return { name: /^event: (.*)$/m.exec(event)?.[1], data: data === '[DONE]' ? data : (JSON.parse(data) as Json) };
    });
/** The text of an answer in `format`, JSON or stream. */
function textOfAnswer(format: Format, text: string, stream: boolean): string {
  if (!stream) {
    const json = JSON.parse(text);
    if (format === 'chat') return json.choices[0].message.content;
    if (format === 'responses')
      return (
        json.output_text ??
        json.output
          .flatMap((item: Json) => item.content ?? [])
          .map((part: Json) => part.text ?? '')
          .join('')
      );
    return json.content
      .filter((block: Json) => block.type === 'text')
      .map((block: Json) => block.text)
      .join('');
  }
  const data = events(text).map(({ data }) => data as Json);
  if (format === 'chat') return data.map((chunk) => chunk.choices?.[0]?.delta?.content ?? '').join('');
  if (format === 'responses')
    return data
      .filter((event) => event.type === 'response.output_text.delta')
      .map((event) => event.delta)
      .join('');
  return data
    .filter((event) => event.type === 'content_block_delta' && event.delta.type === 'text_delta')
    .map((event) => event.delta.text)
    .join('');
}
/** The usage record of the call made after `count` records: the record is written once the answer has ended. */
const recordAfter = async (count: number) => {
  await until(
    async () => records.length,
    (length) => length > count,
  );
  return records[count];
};

test('Converse request: after parallel tool calls, the results open the next user turn in the order of the calls, the text after them', (t) => {
  const request = readChat({
    tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather in Paris and Oslo?' },
      {
        role: 'assistant',
        content: 'Looking both up.',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_2', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_2', content: 'Oslo: 3°C' },
      { role: 'tool', tool_call_id: 'call_1', content: 'Paris: 12°C' },
      { role: 'user', content: 'And which is warmer?' },
    ],
  });
  const body = writeConverseRequest(request);
  t.deepEqual(body.system, [{ text: 'Be brief.' }]);
  t.deepEqual(body.messages, [
    { role: 'user', content: [{ text: 'Weather in Paris and Oslo?' }] },
    {
      role: 'assistant',
      content: [
        { text: 'Looking both up.' },
        { toolUse: { toolUseId: 'call_1', name: 'weather', input: { city: 'Paris' } } },
        { toolUse: { toolUseId: 'call_2', name: 'weather', input: { city: 'Oslo' } } },
      ],
    },
    {
      role: 'user',
      content: [
        { toolResult: { toolUseId: 'call_1', content: [{ text: 'Paris: 12°C' }] } },
        { toolResult: { toolUseId: 'call_2', content: [{ text: 'Oslo: 3°C' }] } },
        { text: 'And which is warmer?' },
      ],
    },
  ]);
  t.deepEqual(body.toolConfig, {
    tools: [{ toolSpec: { name: 'weather', inputSchema: { json: { type: 'object', properties: { city: { type: 'string' } } } } } }],
  });
});

test('Converse request: an assistant turn given back with its tool use before its text sends the text first, its signed reasoning before both', (t) => {
  const request = readMessages({
    tools: [{ name: 'lookup', input_schema: { type: 'object' } }],
    thinking: { type: 'enabled', budget_tokens: 2000 },
    max_tokens: 5000,
    messages: [
      { role: 'user', content: 'Find it.' },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: {} },
          { type: 'text', text: 'Let me look.' },
          { type: 'thinking', thinking: 'I should look it up.', signature: 'sig-abc' },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'found', is_error: true }] },
    ],
  });
  const body = writeConverseRequest(request);
  t.deepEqual((body.messages as Json[])[1]?.content, [
    { reasoningContent: { reasoningText: { text: 'I should look it up.', signature: 'sig-abc' } } },
    { text: 'Let me look.' },
    { toolUse: { toolUseId: 'toolu_1', name: 'lookup', input: {} } },
  ]);
  t.deepEqual((body.messages as Json[])[2]?.content, [{ toolResult: { toolUseId: 'toolu_1', content: [{ text: 'found' }], status: 'error' } }]);
  t.deepEqual(body.additionalModelRequestFields, { thinking: { type: 'enabled', budget_tokens: 2000 } });
  t.deepEqual(body.inferenceConfig, { maxTokens: 5000 });
  t.deepEqual(request.omitted, []);
});

test('Converse request: reasoning without its signature is left out and named; a tool turn without it goes on without thinking, named', (t) => {
  const request = readChat({
    reasoning_effort: 'low',
    tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }],
    messages: [
      { role: 'user', content: 'Find it.' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'found' },
    ],
  });
  const body = writeConverseRequest(request);
  t.is(body.additionalModelRequestFields, undefined);
  t.deepEqual(request.omitted, ['reasoning_effort']);
  // With its signature given back (thinking_blocks, as the gateway answered it), the effort is a budget.
  const signed = readChat({
    reasoning_effort: 'low',
    tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }],
    messages: [
      { role: 'user', content: 'Find it.' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{}' } }],
        thinking_blocks: [{ type: 'thinking', thinking: 'Look it up.', signature: 'sig-1' }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'found' },
    ],
  });
  t.deepEqual(writeConverseRequest(signed).additionalModelRequestFields, { thinking: { type: 'enabled', budget_tokens: 2048 } });
  t.deepEqual(signed.omitted, []);
  // Another model's thinking, given back without a signature, is left out, named.
  const foreign = readMessages({
    messages: [
      { role: 'user', content: 'Hi' },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'Elsewhere.' },
          { type: 'text', text: 'Hello.' },
        ],
      },
      { role: 'user', content: 'Again.' },
    ],
  });
  t.deepEqual((writeConverseRequest(foreign).messages as Json[])[1]?.content, [{ text: 'Hello.' }]);
  t.deepEqual(foreign.omitted, ['thinking']);
});

test("Converse request: a tool call's id Converse would refuse (too long, a dot) goes as a name made from it, the same on its result", (t) => {
  const long = `call_${'x'.repeat(80)}.v2`;
  const request = readChat({
    tools: [WEATHER],
    messages: [
      { role: 'user', content: 'Weather?' },
      { role: 'assistant', content: null, tool_calls: [{ id: long, type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', tool_call_id: long, content: '3°C' },
    ],
  });
  const [, call, result] = writeConverseRequest(request).messages as Json[];
  const id = call?.content[0].toolUse.toolUseId;
  t.regex(id, /^[A-Za-z0-9_-]{1,64}$/);
  t.is(result?.content[0].toolResult.toolUseId, id);
  t.is(toolUseId('tooluse_abc-1'), 'tooluse_abc-1', 'an id that fits goes as it is');
});

test('Converse request: PDFs as document blocks with names Bedrock takes, each once; structured output as outputConfig', (t) => {
  const request = readChat({
    response_format: { type: 'json_schema', json_schema: { name: 'summary', schema: { type: 'object', properties: { title: { type: 'string' } } } } },
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Compare them.' },
          { type: 'file', file: { filename: 'Q3 report_final.v2.pdf', file_data: `data:application/pdf;base64,${PDF}` } },
          { type: 'file', file: { filename: 'Q3 report_final.v2.pdf', file_data: `data:application/pdf;base64,${PDF}` } },
        ],
      },
    ],
  });
  const body = writeConverseRequest(request);
  t.deepEqual((body.messages as Json[])[0]?.content, [
    { text: 'Compare them.' },
    { document: { format: 'pdf', name: 'Q3 report-final-v2', source: { bytes: PDF } } },
    { document: { format: 'pdf', name: 'Q3 report-final-v2 (2)', source: { bytes: PDF } } },
  ]);
  t.deepEqual(body.outputConfig, {
    textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: '{"type":"object","properties":{"title":{"type":"string"}}}', name: 'summary' } } },
  });
});

test('Converse request: what Converse cannot carry is refused by the client’s name', (t) => {
  const refused = (body: Record<string, unknown>) => (t.throws(() => writeConverseRequest(readChat(body)), { any: true }) as Error | undefined)?.message;
  const user = [{ role: 'user', content: 'Hi' }];
  t.regex(refused({ messages: user, response_format: { type: 'json_object' } }) ?? '', /'response_format json_object' cannot be sent .* Bedrock Converse/);
  t.regex(
    refused({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }] }) ?? '',
    /'messages \(an image by URL\)'/,
  );
  t.regex(
    refused({ messages: user, parallel_tool_calls: false, tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }] }) ?? '',
    /'parallel_tool_calls'/,
  );
});

test('Converse request: with thinking, what Claude refuses alongside it is refused before anything is sent, by the client’s names', (t) => {
  const refused = (body: Record<string, unknown>) =>
    (
      t.throws(() => writeConverseRequest(readMessages({ thinking: { type: 'enabled', budget_tokens: 2048 }, max_tokens: 4000, ...body })), { any: true }) as
        | Error
        | undefined
    )?.message;
  const user = [{ role: 'user', content: 'Hi' }];
  t.regex(refused({ messages: user, temperature: 0.2 }) ?? '', /'temperature' cannot be sent to this model with 'thinking'/);
  t.regex(refused({ messages: user, top_p: 0.5 }) ?? '', /'top_p'/);
  t.regex(refused({ messages: user, max_tokens: 1000 }) ?? '', /'max_tokens'.*at least 1024 tokens/);
  t.regex(refused({ messages: user, tools: [{ name: 'f', input_schema: { type: 'object' } }], tool_choice: { type: 'any' } }) ?? '', /'tool_choice'/);
});

test('Converse answer: reasoning with its signature, text, tool uses, the stop reason, and the input counting the cache’s reads and writes', (t) => {
  const answer = readConverseAnswer(
    {
      output: {
        message: {
          role: 'assistant',
          content: [
            { reasoningContent: { reasoningText: { text: 'Think.', signature: 'sig-9' } } },
            { reasoningContent: { redactedContent: 'cmVkYWN0ZWQ=' } },
            { text: 'Calling.' },
            { toolUse: { toolUseId: 'tooluse_A', name: 'weather', input: { city: 'Oslo' } } },
          ],
        },
      },
      stopReason: 'tool_use',
      usage: { inputTokens: 10, outputTokens: 7, totalTokens: 17, cacheReadInputTokens: 100, cacheWriteInputTokens: 20 },
    },
    'bedrock-1',
    'anthropic.claude',
  );
  t.deepEqual(answer.content, [
    { type: 'reasoning', text: 'Think.', signature: 'sig-9' },
    { type: 'redacted-reasoning', data: 'cmVkYWN0ZWQ=' },
    { type: 'text', text: 'Calling.' },
    { type: 'tool-call', id: 'tooluse_A', name: 'weather', input: '{"city":"Oslo"}' },
  ]);
  t.is(answer.finishReason, 'tool-calls');
  t.deepEqual(answer.usage, { inputTokens: 130, outputTokens: 7, cacheReadTokens: 100, cacheWriteTokens: 20 });
});

for (const [stopReason, finishReason] of [...Object.entries(FROM_STOP_REASON), ['malformed_tool_use', 'other'] as const]) {
  test(`Converse answer: stop reason ${stopReason} is ${finishReason}`, (t) => {
    t.is(readConverseAnswer({ output: { message: { content: [] } }, stopReason }, 'id', 'm').finishReason, finishReason);
  });
}

test('ConverseStream: parallel tool calls whose input interleaves, text opened by its first delta, the finish holding for the usage', (t) => {
  const reader = new ConverseStreamReader('bedrock-2', 'm');
  const events: Array<[string, Record<string, unknown>]> = [
    ['messageStart', { role: 'assistant' }],
    ['contentBlockDelta', { contentBlockIndex: 0, delta: { reasoningContent: { text: 'Both.' } } }],
    ['contentBlockDelta', { contentBlockIndex: 0, delta: { reasoningContent: { signature: 'sig-2' } } }],
    ['contentBlockStop', { contentBlockIndex: 0 }],
    ['contentBlockDelta', { contentBlockIndex: 1, delta: { text: 'On it.' } }],
    ['contentBlockStop', { contentBlockIndex: 1 }],
    ['contentBlockStart', { contentBlockIndex: 2, start: { toolUse: { toolUseId: 'tooluse_1', name: 'weather' } } }],
    ['contentBlockStart', { contentBlockIndex: 3, start: { toolUse: { toolUseId: 'tooluse_2', name: 'weather' } } }],
    ['contentBlockDelta', { contentBlockIndex: 2, delta: { toolUse: { input: '{"city":' } } }],
    ['contentBlockDelta', { contentBlockIndex: 3, delta: { toolUse: { input: '{"city":"Oslo"}' } } }],
    ['contentBlockDelta', { contentBlockIndex: 2, delta: { toolUse: { input: '"Paris"}' } } }],
    ['contentBlockStop', { contentBlockIndex: 2 }],
    ['contentBlockStop', { contentBlockIndex: 3 }],
    ['messageStop', { stopReason: 'tool_use' }],
  ];
  const parts: StreamPart[] = events.flatMap(([name, payload]) => reader.read(name, payload));
  t.false(reader.finished);
  parts.push(...reader.read('metadata', { usage: { inputTokens: 3, outputTokens: 4, totalTokens: 7, cacheReadInputTokens: 2 }, metrics: { latencyMs: 1 } }));
  t.true(reader.finished);
  t.deepEqual(
    parts.map((part) => (part.type === 'start' ? { ...part, created: 0 } : part)),
    [
      { type: 'start', id: 'bedrock-2', model: 'm', created: 0 },
      { type: 'reasoning-start' },
      { type: 'reasoning-delta', delta: 'Both.' },
      { type: 'reasoning-signature', signature: 'sig-2' },
      { type: 'reasoning-end' },
      { type: 'text-start' },
      { type: 'text-delta', delta: 'On it.' },
      { type: 'text-end' },
      { type: 'tool-call-start', id: 'tooluse_1', name: 'weather' },
      { type: 'tool-call-start', id: 'tooluse_2', name: 'weather' },
      { type: 'tool-call-delta', id: 'tooluse_1', delta: '{"city":' },
      { type: 'tool-call-delta', id: 'tooluse_2', delta: '{"city":"Oslo"}' },
      { type: 'tool-call-delta', id: 'tooluse_1', delta: '"Paris"}' },
      { type: 'tool-call-end', id: 'tooluse_1' },
      { type: 'tool-call-end', id: 'tooluse_2' },
      { type: 'finish', finishReason: 'tool-calls', usage: { inputTokens: 5, outputTokens: 4, cacheReadTokens: 2 } },
    ],
  );
});

for (const format of FORMATS) {
  for (const stream of [false, true]) {
    test.serial(
      `${format}, ${stream ? 'streamed' : 'JSON'}: text from Converse${stream ? 'Stream' : ''}, signed, the cache's tokens counted and priced from the table`,
      async (t) => {
        const usage = { inputTokens: 1000, outputTokens: 100, cacheReadInputTokens: 2000, cacheWriteInputTokens: 400 };
        mock.script(() =>
          stream
            ? { stream: textStream(['Hello', ' from', ' Bedrock.'], usage) }
            : { json: converseAnswer([{ text: 'Hello from Bedrock.' }], 'end_turn', usage) },
        );
        const before = mock.calls.length;
        const counted = records.length;
        const answer = await call(format, body(format, 'claude-bedrock', 'Hi', stream ? { stream: true } : {}));
        t.is(answer.status, 200, answer.text);
        t.is(textOfAnswer(format, answer.text, stream), 'Hello from Bedrock.');
        const sent = mock.calls[before]!;
        t.is(sent.operation, stream ? 'converse-stream' : 'converse');
        t.is(sent.model, SONNET);
        t.deepEqual(sent.body.system, [{ text: 'Be brief.' }]);
        t.deepEqual(sent.body.messages, [{ role: 'user', content: [{ text: 'Hi' }] }]);
        t.false(JSON.stringify(sent).includes(key), "the client's key never goes upstream");
        const record = await recordAfter(counted);
        t.like(record, { model: 'claude-bedrock', provider: 'bedrock', status: 200, stream, inputTokens: 3400, outputTokens: 100 });
        // $3.30, $0.33, $4.125 and $16.50 a million input, cached, cache-written and output tokens.
        t.is(record?.costPicoUsd, 1000 * 3_300_000 + 2000 * 330_000 + 400 * 4_125_000 + 100 * 16_500_000);
      },
    );
  }
}

test.serial('an inference profile ARN goes in the path URL-encoded, and the mock checks the whole signature: a wrong secret is refused, a 502', async (t) => {
  mock.script(() => ({ json: converseAnswer([{ text: 'ok' }]) }));
  const before = mock.calls.length;
  t.is((await call('chat', body('chat', 'profile', 'Hi'))).status, 200);
  t.is(mock.calls[before]?.path, `/model/${encodeURIComponent(PROFILE_ARN)}/converse`);
  t.is(mock.calls[before]?.model, PROFILE_ARN);
  const unsigned = await call('chat', body('chat', 'unsigned', 'Hi'));
  t.is(unsigned.status, 502);
  t.false(unsigned.text.includes('signature'), "the upstream's words stay out of a 502");
  t.is(mock.calls.length, before + 1);
});

/** A stream of two parallel tool calls, after a little text, whose arguments interleave. */
const parallelCalls: StreamMessage[] = [
  { event: 'messageStart', payload: { role: 'assistant' } },
  { event: 'contentBlockDelta', payload: { contentBlockIndex: 0, delta: { text: 'Checking both.' } } },
  { event: 'contentBlockStop', payload: { contentBlockIndex: 0 } },
  { event: 'contentBlockStart', payload: { contentBlockIndex: 1, start: { toolUse: { toolUseId: 'tooluse_paris', name: 'weather' } } } },
  { event: 'contentBlockDelta', payload: { contentBlockIndex: 1, delta: { toolUse: { input: '{"city":' } } } },
  { event: 'contentBlockStart', payload: { contentBlockIndex: 2, start: { toolUse: { toolUseId: 'tooluse_oslo', name: 'weather' } } } },
  { event: 'contentBlockDelta', payload: { contentBlockIndex: 2, delta: { toolUse: { input: '{"city":"Oslo"}' } } } },
  { event: 'contentBlockDelta', payload: { contentBlockIndex: 1, delta: { toolUse: { input: '"Paris"}' } } } },
  { event: 'contentBlockStop', payload: { contentBlockIndex: 1 } },
  { event: 'contentBlockStop', payload: { contentBlockIndex: 2 } },
  { event: 'messageStop', payload: { stopReason: 'tool_use' } },
  { event: 'metadata', payload: { usage: { inputTokens: 50, outputTokens: 30, totalTokens: 80 }, metrics: { latencyMs: 10 } } },
];
const WEATHER = {
  type: 'function',
  function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};

test.serial('Chat Completions: parallel tool calls streamed, and their results given back out of order reach Converse in the order of the calls', async (t) => {
  mock.script(() => ({ stream: parallelCalls }));
  const streamed = await call('chat', body('chat', 'claude-bedrock', 'Weather in Paris and Oslo?', { stream: true, tools: [WEATHER] }));
  t.is(streamed.status, 200, streamed.text);
  const chunks = events(streamed.text)
    .map(({ data }) => data)
    .filter((data): data is Json => data !== '[DONE]');
  const calls = new Map<number, { id: string; name: string; args: string }>();
  for (const delta of chunks.flatMap((chunk) => chunk.choices?.[0]?.delta?.tool_calls ?? [])) {
    const known = calls.get(delta.index) ?? { id: '', name: '', args: '' };
    calls.set(delta.index, { id: delta.id ?? known.id, name: delta.function?.name ?? known.name, args: known.args + (delta.function?.arguments ?? '') });
  }
  t.deepEqual(
    [...calls.values()].map((call) => [call.id, call.name, JSON.parse(call.args)]),
    [
      ['tooluse_paris', 'weather', { city: 'Paris' }],
      ['tooluse_oslo', 'weather', { city: 'Oslo' }],
    ],
  );
  t.is(chunks.findLast((chunk) => chunk.choices?.[0]?.finish_reason)?.choices[0].finish_reason, 'tool_calls');

  mock.script(() => ({ json: converseAnswer([{ text: 'Paris is warmer.' }]) }));
  const before = mock.calls.length;
  const next = await call('chat', {
    model: 'claude-bedrock',
    tools: [WEATHER],
    messages: [
      { role: 'user', content: 'Weather in Paris and Oslo?' },
      {
        role: 'assistant',
        content: 'Checking both.',
        tool_calls: [...calls.values()].map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.args } })),
      },
      { role: 'tool', tool_call_id: 'tooluse_oslo', content: '3°C' },
      { role: 'tool', tool_call_id: 'tooluse_paris', content: '12°C' },
    ],
  });
  t.is(next.status, 200, next.text);
  t.deepEqual(mock.calls[before]?.body.messages.at(-1), {
    role: 'user',
    content: [
      { toolResult: { toolUseId: 'tooluse_paris', content: [{ text: '12°C' }] } },
      { toolResult: { toolUseId: 'tooluse_oslo', content: [{ text: '3°C' }] } },
    ],
  });
  t.deepEqual(mock.calls[before]?.body.toolConfig.tools[0], {
    toolSpec: { name: 'weather', inputSchema: { json: WEATHER.function.parameters } },
  });
});

test.serial('Messages: parallel tool uses streamed as tool_use blocks, stop_reason tool_use', async (t) => {
  mock.script(() => ({ stream: parallelCalls }));
  const streamed = await call(
    'messages',
    body('messages', 'claude-bedrock', 'Weather?', { stream: true, tools: [{ name: 'weather', input_schema: WEATHER.function.parameters }] }),
  );
  t.is(streamed.status, 200, streamed.text);
  const data = events(streamed.text).map(({ data }) => data as Json);
  t.deepEqual(
    data
      .filter((event) => event.type === 'content_block_start')
      .map((event) => event.content_block.type + (event.content_block.id ? `:${event.content_block.id}` : '')),
    ['text', 'tool_use:tooluse_paris', 'tool_use:tooluse_oslo'],
  );
  t.is(data.find((event) => event.type === 'message_delta')?.delta.stop_reason, 'tool_use');
  t.is(data.at(-1)?.type, 'message_stop');
});

const THINKING = [{ reasoningContent: { reasoningText: { text: 'The user wants a number.', signature: 'EqQBCkYIARgCKkBsig' } } }, { text: '42' }];

test.serial('reasoning with its signature comes back on the next turn: Messages and Chat Completions (thinking_blocks), JSON and streamed', async (t) => {
  mock.script(() => ({ json: converseAnswer(THINKING) }));
  const messages = JSON.parse(
    (await call('messages', body('messages', 'claude-bedrock', 'Answer?', { max_tokens: 3000, thinking: { type: 'enabled', budget_tokens: 1024 } }))).text,
  );
  t.deepEqual(messages.content[0], { type: 'thinking', thinking: 'The user wants a number.', signature: 'EqQBCkYIARgCKkBsig' });
  t.deepEqual(mock.calls.at(-1)?.body.additionalModelRequestFields, { thinking: { type: 'enabled', budget_tokens: 1024 } });

  const chat = JSON.parse((await call('chat', body('chat', 'claude-bedrock', 'Answer?', { reasoning_effort: 'low' }))).text);
  const { message } = chat.choices[0];
  t.deepEqual(message.thinking_blocks, [{ type: 'thinking', thinking: 'The user wants a number.', signature: 'EqQBCkYIARgCKkBsig' }]);

  mock.script(() => ({ json: converseAnswer([{ text: 'Yes.' }]) }));
  await call('chat', {
    model: 'claude-bedrock',
    reasoning_effort: 'low',
    messages: [{ role: 'user', content: 'Answer?' }, message, { role: 'user', content: 'Sure?' }],
  });
  t.deepEqual(mock.calls.at(-1)?.body.messages[1], {
    role: 'assistant',
    content: [{ reasoningContent: { reasoningText: { text: 'The user wants a number.', signature: 'EqQBCkYIARgCKkBsig' } } }, { text: '42' }],
  });

  mock.script(() => ({
    stream: [
      { event: 'messageStart', payload: { role: 'assistant' } },
      { event: 'contentBlockDelta', payload: { contentBlockIndex: 0, delta: { reasoningContent: { text: 'Hmm.' } } } },
      { event: 'contentBlockDelta', payload: { contentBlockIndex: 0, delta: { reasoningContent: { signature: 'sig-streamed' } } } },
      { event: 'contentBlockStop', payload: { contentBlockIndex: 0 } },
      ...textStream(['42']).slice(1),
    ],
  }));
  const streamed = await call(
    'messages',
    body('messages', 'claude-bedrock', 'Answer?', { stream: true, max_tokens: 3000, thinking: { type: 'enabled', budget_tokens: 1024 } }),
  );
  const deltas = events(streamed.text)
    .map(({ data }) => data as Json)
    .filter((event) => event.type === 'content_block_delta')
    .map((event) => event.delta);
  t.deepEqual(deltas, [
    { type: 'thinking_delta', thinking: 'Hmm.' },
    { type: 'signature_delta', signature: 'sig-streamed' },
    { type: 'text_delta', text: '42' },
  ]);
});

test.serial('PDFs: inline and stored files reach Converse as document blocks', async (t) => {
  const pdf = makePdf(1);
  const id = await gateway.storePdf(pdf, { filename: 'annual report.pdf' });
  mock.script(() => ({ json: converseAnswer([{ text: 'Two documents.' }]) }));
  const answer = await call('chat', {
    model: 'claude-bedrock',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Summarise.' },
          { type: 'file', file: { file_id: id } },
          { type: 'file', file: { filename: 'notes.pdf', file_data: `data:application/pdf;base64,${pdf.toString('base64')}` } },
        ],
      },
    ],
  });
  t.is(answer.status, 200, answer.text);
  t.deepEqual(mock.calls.at(-1)?.body.messages[0].content, [
    { text: 'Summarise.' },
    { document: { format: 'pdf', name: 'annual report', source: { bytes: pdf.toString('base64') } } },
    { document: { format: 'pdf', name: 'notes', source: { bytes: pdf.toString('base64') } } },
  ]);
});

test.serial(
  'errors: a ThrottlingException answered or at the start of the stream is a 429 retried on the next deployment; a ValidationException a 400 with its message',
  async (t) => {
    const throttled = {
      status: 429,
      json: { message: 'Too many requests, please wait before trying again.' },
      headers: { 'x-amzn-errortype': 'ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/' },
    };
    mock.script((sent) => (sent.model === 'first' ? throttled : { json: converseAnswer([{ text: 'From the spare.' }]) }));
    cooled.length = 0;
    const retried = await call('chat', body('chat', 'routed', 'Hi'));
    t.is(retried.status, 200, retried.text);
    t.is(textOfAnswer('chat', retried.text, false), 'From the spare.');
    t.is(cooled.length, 1, 'the throttled deployment cools down');

    mock.script((sent) =>
      sent.model === 'first'
        ? {
            stream: [
              { event: 'messageStart', payload: { role: 'assistant' } },
              { exception: 'throttlingException', message: 'Too many tokens.' },
            ],
          }
        : { stream: textStream(['Spare.']) },
    );
    const streamed = await call('messages', body('messages', 'routed', 'Hi', { stream: true }));
    t.is(textOfAnswer('messages', streamed.text, true), 'Spare.');
    t.is(cooled.length, 2, 'throttled in its stream, it cools down too');

    mock.script(() => throttled);
    const refused = await call('messages', body('messages', 'claude-bedrock', 'Hi'));
    t.is(refused.status, 429);
    t.like(JSON.parse(refused.text), { type: 'error', error: { type: 'rate_limit_error', message: 'Too many requests, please wait before trying again.' } });

    mock.script(() => ({
      status: 400,
      json: { message: 'The model returned the following errors: max_tokens too large' },
      headers: { 'x-amzn-errortype': 'ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/' },
    }));
    const invalid = await call('chat', body('chat', 'claude-bedrock', 'Hi'));
    t.is(invalid.status, 400);
    t.is(JSON.parse(invalid.text).error.message, 'The model returned the following errors: max_tokens too large');
  },
);

for (const format of FORMATS) {
  test.serial(`${format}: an exception in the middle of the stream ends it in the client's error event, never looking whole`, async (t) => {
    mock.script(() => ({
      stream: [...textStream(['Half an ans']).slice(0, 2), { exception: 'modelStreamErrorException', message: 'Model stream failed, secret detail' }],
    }));
    const answer = await call(format, body(format, 'claude-bedrock', 'Hi', { stream: true }));
    t.is(answer.status, 200);
    t.is(textOfAnswer(format, answer.text, true), 'Half an ans');
    t.false(answer.text.includes('secret detail'));
    const last = events(answer.text).at(-1);
    if (format === 'messages') t.is(last?.name, 'error');
    else if (format === 'responses') t.is((last!.data as Json).type, 'error');
    else t.truthy((last!.data as Json).error);
  });
}

test.serial('embeddings: Titan through InvokeModel, one input a call, in order, tokens summed and priced', async (t) => {
  mock.script((sent) => ({ json: { embedding: [sent.body.inputText.length, 0.5], inputTextTokenCount: sent.body.inputText.length } }));
  const before = mock.calls.length;
  const counted = records.length;
  const res = await gateway.post('/v1/embeddings', { model: 'titan', input: ['abc', 'hello'], dimensions: 256 }, { authorization: `Bearer ${key}` });
  const answer = (await res.json()) as Json;
  t.is(res.status, 200, JSON.stringify(answer));
  t.deepEqual(
    answer.data.map((item: Json) => item.embedding),
    [
      [3, 0.5],
      [5, 0.5],
    ],
  );
  t.like(answer.usage, { prompt_tokens: 8, total_tokens: 8 });
  t.deepEqual(
    mock.calls.slice(before).map((sent) => [sent.operation, sent.model, sent.body]),
    [
      ['invoke', 'amazon.titan-embed-text-v2:0', { inputText: 'abc', dimensions: 256 }],
      ['invoke', 'amazon.titan-embed-text-v2:0', { inputText: 'hello', dimensions: 256 }],
    ],
  );
  t.like(await recordAfter(counted), { model: 'titan', inputTokens: 8, costPicoUsd: 8 * 20_000 });
});

test.serial('Responses: tool calls and their outputs given back as items, in the order of the calls; a JSON schema as structured output', async (t) => {
  mock.script(() => ({ json: converseAnswer([{ text: '{"warmer":"Paris"}' }]) }));
  const answer = await call('responses', {
    model: 'claude-bedrock',
    tools: [{ type: 'function', name: 'weather', parameters: WEATHER.function.parameters }],
    text: { format: { type: 'json_schema', name: 'verdict', schema: { type: 'object', properties: { warmer: { type: 'string' } }, required: ['warmer'] } } },
    input: [
      { role: 'user', content: 'Which is warmer, Paris or Oslo?' },
      { type: 'function_call', call_id: 'tooluse_paris', name: 'weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call', call_id: 'tooluse_oslo', name: 'weather', arguments: '{"city":"Oslo"}' },
      { type: 'function_call_output', call_id: 'tooluse_oslo', output: '3°C' },
      { type: 'function_call_output', call_id: 'tooluse_paris', output: '12°C' },
    ],
  });
  t.is(answer.status, 200, answer.text);
  t.is(textOfAnswer('responses', answer.text, false), '{"warmer":"Paris"}');
  const sent = mock.calls.at(-1)?.body;
  t.deepEqual(
    sent?.messages.map((message: Json) => [
      message.role,
      message.content.map((block: Json) => Object.keys(block)[0] + (block.toolResult ? `:${block.toolResult.toolUseId}` : '')),
    ]),
    [
      ['user', ['text']],
      ['assistant', ['toolUse', 'toolUse']],
      ['user', ['toolResult:tooluse_paris', 'toolResult:tooluse_oslo']],
    ],
  );
  t.deepEqual(sent?.outputConfig, {
    textFormat: {
      type: 'json_schema',
      structure: { jsonSchema: { name: 'verdict', schema: '{"type":"object","properties":{"warmer":{"type":"string"}},"required":["warmer"]}' } },
    },
  });
});

test.serial("embeddings: Cohere on Bedrock in its own body, the input tokens from Bedrock's header", async (t) => {
  mock.script(() => ({
    json: { id: 'e1', response_type: 'embeddings_by_type', embeddings: { float: [[0.25, -0.5]] }, texts: ['hola'] },
    headers: { 'x-amzn-bedrock-input-token-count': '4' },
  }));
  const res = await gateway.post('/v1/embeddings', { model: 'cohere-embed', input: 'hola' }, { authorization: `Bearer ${key}` });
  const answer = (await res.json()) as Json;
  t.is(res.status, 200, JSON.stringify(answer));
  t.deepEqual(answer.data[0].embedding, [0.25, -0.5]);
  t.like(answer.usage, { prompt_tokens: 4 });
  t.deepEqual(mock.calls.at(-1)?.body, { texts: ['hola'], input_type: 'search_document', embedding_types: ['float'] });
  const tokens = await gateway.post('/v1/embeddings', { model: 'titan', input: [1, 2, 3] }, { authorization: `Bearer ${key}` });
  t.is(tokens.status, 400);
  t.regex(((await tokens.json()) as Json).error.message, /token ids/);
});

test.serial("AWS's default credential chain signs as the named variables do; hints Converse has no place for are named in x-kmg-omitted", async (t) => {
  mock.script(() => ({ json: converseAnswer([{ text: 'Signed by the chain.' }]) }));
  const answer = await call('chat', body('chat', 'default-chain', 'Hi', { user: 'end-user-7', prompt_cache_key: 'k1' }));
  t.is(answer.status, 200, answer.text);
  t.is(textOfAnswer('chat', answer.text, false), 'Signed by the chain.');
  t.is(answer.headers.get('x-kmg-omitted'), 'user,prompt_cache_key');
  t.false(JSON.stringify(mock.calls.at(-1)?.body).includes('end-user-7'));
});

test.serial('a client that leaves mid-stream closes the call to Bedrock', async (t) => {
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  mock.script(() => ({ stream: textStream(['One', ' two', ' three']), hold: { at: 2, until: held } }));
  const before = mock.closed.count;
  const leaving = new AbortController();
  const res = await gateway.post(PATHS.chat, body('chat', 'claude-bedrock', 'Count.', { stream: true }), HEADERS.chat, leaving.signal);
  const reader = res.body!.getReader();
  await reader.read();
  leaving.abort();
  await until(
    async () => mock.closed.count,
    (count) => count > before,
  );
  release();
  t.is(mock.closed.count, before + 1);
});

test.serial('Responses: reasoning comes back as an item whose encrypted_content is its signature, and goes back to Converse with it', async (t) => {
  mock.script(() => ({ json: converseAnswer(THINKING) }));
  const first = JSON.parse((await call('responses', body('responses', 'claude-bedrock', 'Answer?', { reasoning: { effort: 'low' } }))).text);
  const reasoning = first.output.find((item: Json) => item.type === 'reasoning');
  t.like(reasoning, { summary: [{ type: 'summary_text', text: 'The user wants a number.' }], encrypted_content: 'EqQBCkYIARgCKkBsig' });
  mock.script(() => ({ json: converseAnswer([{ text: 'Yes.' }]) }));
  const next = await call('responses', {
    model: 'claude-bedrock',
    reasoning: { effort: 'low' },
    input: [{ role: 'user', content: 'Answer?' }, ...first.output, { role: 'user', content: 'Sure?' }],
  });
  t.is(next.status, 200, next.text);
  t.deepEqual(mock.calls.at(-1)?.body.messages[1].content[0], {
    reasoningContent: { reasoningText: { text: 'The user wants a number.', signature: 'EqQBCkYIARgCKkBsig' } },
  });
});

test('traces name the provider as the GenAI conventions spell it, with its host and port', (t) => {
  t.deepEqual(provider('traced').telemetry, { providerName: 'aws.bedrock', serverAddress: '127.0.0.1', serverPort: Number(new URL(mock.url).port) });
  t.like(bedrockProvider({ id: 'default', region: 'eu-west-3' }).telemetry, { serverAddress: 'bedrock-runtime.eu-west-3.amazonaws.com', serverPort: 443 });
});

test('a bad bedrock entry is refused when the provider is made, naming the setting; a variable named but unset too', (t) => {
  const refused = (options: Record<string, unknown>) => t.throws(() => bedrockProvider(options as never), { instanceOf: TypeError })?.message;
  t.is(refused({ id: 'b', region: 'Virginia' }), 'koa-model-gateway: bedrockProvider(): region must be an AWS region (us-east-1, eu-west-3...)');
  t.regex(
    refused({ id: 'b', region: 'us-east-1', accessKeyIdEnv: 'KMG_TEST_BEDROCK_KEY_ID' }) ?? '',
    /the options must name accessKeyIdEnv and secretAccessKeyEnv together/,
  );
  t.is(
    refused({ id: 'b', region: 'us-east-1', accessKeyIdEnv: 'KMG_TEST_BEDROCK_KEY_ID', secretAccessKeyEnv: 'KMG_TEST_UNSET_SECRET' }),
    "koa-model-gateway: bedrockProvider(): provider 'b': the environment variable KMG_TEST_UNSET_SECRET is not set",
  );
});

test.serial("Messages' count_tokens for a Bedrock model is the gateway's estimate: nothing is sent to Bedrock", async (t) => {
  const before = mock.calls.length;
  const res = await gateway.post(
    '/v1/messages/count_tokens',
    { model: 'claude-bedrock', messages: [{ role: 'user', content: 'How many tokens is this?' }] },
    HEADERS.messages,
  );
  t.is(res.status, 200);
  t.true(((await res.json()) as Json).input_tokens > 0);
  t.is(mock.calls.length, before);
});

test('EventStream messages are cut whole however the bytes arrive; one whose prelude claims more than the limit is refused before it is held', async (t) => {
  const aws = await loadAws('bedrock', MOCK_REGION, async () => MOCK_CREDENTIALS);
  const bytes = Buffer.concat(textStream(['Hi']).map(frame));
  async function* byteByByte() {
    for (const byte of bytes) yield Buffer.of(byte);
  }
  const decoded = [];
  for await (const message of aws.messages(byteByByte(), 1024)) decoded.push(message.headers[':event-type']);
  t.deepEqual(decoded, ['messageStart', 'contentBlockDelta', 'contentBlockStop', 'messageStop', 'metadata']);

  /** Reads every message of `messages`, keeping none. */
  const drain = async (messages: AsyncIterable<unknown>) => {
    for await (const message of messages) void message;
  };
  const claim = Buffer.alloc(12);
  claim.writeUInt32BE(1 << 30, 0);
  t.like(await t.throwsAsync(drain(aws.messages(Readable.from([claim]), 1024)), { any: true }), {
    status: 502,
    message: "Upstream provider error: its answer is over the gateway's limit of 1024 bytes",
  });
  await t.throwsAsync(drain(aws.messages(Readable.from([bytes.subarray(0, bytes.length - 3)]), 1024)), { message: 'the EventStream ended mid-message' });
});

test.serial("the SDKs read Bedrock's parallel tool calls: the openai SDK's stream helper and the anthropic SDK's, with the cache's usage", async (t) => {
  mock.script(() => ({ stream: parallelCalls }));
  const openai = new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  const completion = await openai.chat.completions
    .stream({ model: 'claude-bedrock', messages: [{ role: 'user', content: 'Weather?' }], tools: [WEATHER as OpenAI.ChatCompletionTool] })
    .finalChatCompletion();
  t.deepEqual(
    completion.choices[0]?.message.tool_calls?.map((call) => (call.type === 'function' ? [call.id, call.function.arguments] : [])),
    [
      ['tooluse_paris', '{"city":"Paris"}'],
      ['tooluse_oslo', '{"city":"Oslo"}'],
    ],
  );

  mock.script(() => ({ stream: textStream(['Cached.'], { inputTokens: 10, outputTokens: 2, cacheReadInputTokens: 90, cacheWriteInputTokens: 5 }) }));
  const anthropic = new Anthropic({ apiKey: key, baseURL: gateway.url, maxRetries: 0 });
  const message = await anthropic.messages.stream({ model: 'claude-bedrock', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
  t.is(message.content.map((block) => (block.type === 'text' ? block.text : '')).join(''), 'Cached.');
  // Messages counts the cache's reads and writes apart from the input, as Bedrock does.
  t.like(message.usage, { input_tokens: 10, output_tokens: 2, cache_read_input_tokens: 90, cache_creation_input_tokens: 5 });
});
