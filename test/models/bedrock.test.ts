import test from 'ava';
import { chatCompletionsFormat } from '../../lib/models/formats/chat-completions/index.js';
import { messagesFormat } from '../../lib/models/formats/messages/index.js';
import type { StreamPart } from '../../lib/models/formats/neutral.js';
import { ConverseStreamReader } from '../../lib/models/providers/bedrock/converse-stream.js';
import { CONVERSE, FROM_STOP_REASON, readConverseAnswer, writeConverseRequest } from '../../lib/models/providers/bedrock/converse.js';

// Bedrock's Converse API: the mapping of the neutral representation (request, answer, stream),
// then the provider against a mock of Bedrock built from its published reference.

const PDF = Buffer.from('%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n').toString('base64');
const readChat = (body: Record<string, unknown>) => chatCompletionsFormat.client.readRequest({ model: 'm', ...body }, CONVERSE);
const readMessages = (body: Record<string, unknown>) => messagesFormat.client.readRequest({ model: 'm', max_tokens: 100, ...body }, CONVERSE);

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
  t.deepEqual((body.messages as any[])[1].content, [
    { reasoningContent: { reasoningText: { text: 'I should look it up.', signature: 'sig-abc' } } },
    { text: 'Let me look.' },
    { toolUse: { toolUseId: 'toolu_1', name: 'lookup', input: {} } },
  ]);
  t.deepEqual((body.messages as any[])[2].content, [{ toolResult: { toolUseId: 'toolu_1', content: [{ text: 'found' }], status: 'error' } }]);
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
  t.deepEqual((body.messages as any[])[0].content, [
    { text: 'Compare them.' },
    { document: { format: 'pdf', name: 'Q3 report-final-v2', source: { bytes: PDF } } },
    { document: { format: 'pdf', name: 'Q3 report-final-v2 (2)', source: { bytes: PDF } } },
  ]);
  t.deepEqual(body.outputConfig, {
    textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: '{"type":"object","properties":{"title":{"type":"string"}}}', name: 'summary' } } },
  });
});

test('Converse request: what Converse cannot carry is refused by the client’s name', (t) => {
  const refused = (body: Record<string, unknown>) => t.throws(() => writeConverseRequest(readChat(body)))?.message;
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
  t.deepEqual(answer.usage, { inputTokens: 130, outputTokens: 7, cachedInputTokens: 100, cacheWriteTokens: 20 });
});

for (const [stopReason, finishReason] of [...Object.entries(FROM_STOP_REASON), ['malformed_tool_use', 'other']]) {
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
      { type: 'finish', finishReason: 'tool-calls', usage: { inputTokens: 5, outputTokens: 4, cachedInputTokens: 2 } },
    ],
  );
});
