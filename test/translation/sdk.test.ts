import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import Anthropic from '@anthropic-ai/sdk';
import { ChatAnthropic } from '@langchain/anthropic';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { betaTool } from '@anthropic-ai/sdk/helpers/beta/json-schema';
import { betaZodOutputFormat } from '@anthropic-ai/sdk/helpers/beta/zod';
import { zodOutputFormat } from '@anthropic-ai/sdk/helpers/zod';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import OpenAI, { toFile } from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { makePdf } from '../helpers/models-pdf.js';
import { checkedFetch } from '../helpers/openapi.js';
import { referenceApp } from '../helpers/reference-app.js';

// The SDKs as their users write them, against the reference server, calling models of the other
// format: the openai SDK a model on an `anthropic` provider, @anthropic-ai/sdk one on an `openai`
// provider that has Chat Completions only. The mock upstreams answer with the providers' recorded
// shapes (test/fixtures/translation).

const test = anyTest as TestFn<{ problems: string[]; fetch: typeof fetch }>;
const fixture = (name: string) => readFile(new URL(`../../../test/fixtures/translation/${name}`, import.meta.url), 'utf8');
const ANTHROPIC_TOOL_STREAM = await fixture('anthropic-text-and-parallel-tool-use.sse');
const OPENAI_TOOL_STREAM = await fixture('openai-parallel-tool-calls.sse');
const OPENAI_TEXT_STREAM = await fixture('openai-text.sse');
const ANTHROPIC_THINKING_STREAM = await fixture('anthropic-thinking-then-text.sse');
const RESPONSES_TOOL_STREAM = await fixture('openai-responses-text-and-function-calls.sse');
const responsesToolAnswer = (JSON.parse(await fixture('chat-to-responses-tool-history-image.case.json')) as { upstreamAnswer: unknown }).upstreamAnswer;

const upstreamRequests: Array<{ path: string; body: Record<string, unknown> }> = [];

// Two parallel calls whose arguments interleave, as an OpenAI-compatible server may stream them
// (OpenAI's own come one after the other); asked for with a tool named `interleaved`.
const chunk = (delta: unknown, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-Mix', object: 'chat.completion.chunk', created: 1, model: 'gpt-upstream-2025', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const callPiece = (index: number, args: string, id?: string) => ({
  tool_calls: [{ index, ...(id && { id, type: 'function' }), function: { ...(id && { name: 'interleaved' }), arguments: args } }],
});
const INTERLEAVED_TOOL_STREAM = [
  chunk({ role: 'assistant', content: null, ...callPiece(0, '{"city":', 'call_a') }),
  chunk(callPiece(1, '{"tz"', 'call_b')),
  chunk(callPiece(0, '"Paris"}')),
  chunk(callPiece(1, ':"CET"}')),
  chunk({}, 'tool_calls'),
  `data: ${JSON.stringify({ id: 'chatcmpl-Mix', object: 'chat.completion.chunk', created: 1, model: 'gpt-upstream-2025', choices: [], usage: { prompt_tokens: 20, completion_tokens: 12, total_tokens: 32 } })}\n\n`,
  'data: [DONE]\n\n',
].join('');
// A refusal, as each OpenAI API says one: asked for by the prompt "Help me break in.".
const REFUSAL = "I can't help with that.";
const refuses = (body: Record<string, unknown>) => JSON.stringify(body).includes('Help me break in.');
const chatRefusal = {
  id: 'chatcmpl-Ref',
  object: 'chat.completion',
  created: 1,
  model: 'gpt-upstream-2025',
  choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: REFUSAL }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 9, completion_tokens: 6, total_tokens: 15 },
};
const CHAT_REFUSAL_STREAM = [
  chunk({ role: 'assistant', content: null, refusal: "I can't " }),
  chunk({ refusal: 'help with that.' }),
  chunk({}, 'stop'),
  'data: [DONE]\n\n',
].join('');
const responsesEvent = (data: Record<string, unknown>) => `event: ${String(data.type)}\ndata: ${JSON.stringify(data)}\n\n`;
const refusalMessage = { id: 'msg_ref', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'refusal', refusal: REFUSAL }] };
const refusalResponse = (status: string, output: unknown[]) => ({
  id: 'resp_ref',
  object: 'response',
  created_at: 1,
  status,
  model: 'gpt-5',
  output,
  usage: status === 'completed' ? { input_tokens: 9, output_tokens: 6, total_tokens: 15 } : null,
});
const RESPONSES_REFUSAL_STREAM = [
  responsesEvent({ type: 'response.created', sequence_number: 0, response: refusalResponse('in_progress', []) }),
  responsesEvent({ type: 'response.output_item.added', sequence_number: 1, output_index: 0, item: { ...refusalMessage, status: 'in_progress', content: [] } }),
  responsesEvent({
    type: 'response.content_part.added',
    sequence_number: 2,
    item_id: 'msg_ref',
    output_index: 0,
    content_index: 0,
    part: { type: 'refusal', refusal: '' },
  }),
  responsesEvent({ type: 'response.refusal.delta', sequence_number: 3, item_id: 'msg_ref', output_index: 0, content_index: 0, delta: "I can't " }),
  responsesEvent({ type: 'response.refusal.delta', sequence_number: 4, item_id: 'msg_ref', output_index: 0, content_index: 0, delta: 'help with that.' }),
  responsesEvent({ type: 'response.refusal.done', sequence_number: 5, item_id: 'msg_ref', output_index: 0, content_index: 0, refusal: REFUSAL }),
  responsesEvent({ type: 'response.output_item.done', sequence_number: 6, output_index: 0, item: refusalMessage }),
  responsesEvent({ type: 'response.completed', sequence_number: 7, response: refusalResponse('completed', [refusalMessage]) }),
].join('');

const interleavedTool = { name: 'interleaved', input_schema: { type: 'object' as const, properties: {} } };
const isInterleavedCall = (body: Record<string, unknown>) => JSON.stringify(body.tools ?? []).includes('"interleaved"');

const anthropicToolAnswer = {
  id: 'msg_01Aq9w938a90dw8q',
  type: 'message',
  role: 'assistant',
  model: 'claude-upstream-2025',
  content: [
    { type: 'text', text: 'Checking both.' },
    { type: 'tool_use', id: 'toolu_01A', name: 'get_weather', input: { location: 'San Francisco, CA' } },
    { type: 'tool_use', id: 'toolu_01B', name: 'get_weather', input: { location: 'Paris, France' } },
  ],
  stop_reason: 'tool_use',
  stop_sequence: null,
  usage: { input_tokens: 400, cache_creation_input_tokens: 0, cache_read_input_tokens: 72, output_tokens: 60 },
};

const openAIToolAnswer = {
  id: 'chatcmpl-Tools1',
  object: 'chat.completion',
  created: 1_744_000_000,
  model: 'gpt-upstream-2025',
  choices: [
    {
      index: 0,
      message: {
        role: 'assistant',
        content: null,
        refusal: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Paris, France"}' } },
          { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Bogotá, Colombia"}' } },
        ],
      },
      logprobs: null,
      finish_reason: 'tool_calls',
    },
  ],
  usage: { prompt_tokens: 82, completion_tokens: 41, total_tokens: 123, prompt_tokens_details: { cached_tokens: 64 } },
};

// Structured outputs: the weather as JSON, as each provider answers it.
const WEATHER_JSON = '{"city":"Paris","temperature_c":18}';
const weatherSchema = z.object({ city: z.string(), temperature_c: z.number() });
const anthropicWeatherJson = { ...anthropicToolAnswer, content: [{ type: 'text', text: WEATHER_JSON }], stop_reason: 'end_turn' };
const openAIWeatherJson = {
  ...openAIToolAnswer,
  choices: [{ index: 0, message: { role: 'assistant', content: WEATHER_JSON, refusal: null }, logprobs: null, finish_reason: 'stop' }],
};

// A tool loop's last turn: a tool's result is answered with text, so that the loop ends.
const lastTurn = (body: Record<string, unknown>) => (Array.isArray(body.messages) ? body.messages.at(-1) : undefined) as Record<string, unknown> | undefined;
const afterToolResult = (body: Record<string, unknown>) =>
  lastTurn(body)?.role === 'tool' || JSON.stringify(lastTurn(body)?.content ?? '').includes('"tool_result"');
const anthropicTextAnswer = { ...anthropicToolAnswer, content: [{ type: 'text', text: 'Sunny everywhere.' }], stop_reason: 'end_turn' };
const anthropicThinkingAnswer = {
  ...anthropicToolAnswer,
  content: [{ type: 'thinking', thinking: 'Both cities.', signature: 'sig-both' }, ...anthropicToolAnswer.content],
};
const openAITextAnswer = {
  ...openAIToolAnswer,
  choices: [{ index: 0, message: { role: 'assistant', content: 'Sunny everywhere.', refusal: null }, logprobs: null, finish_reason: 'stop' }],
};

const upstream = createServer(async (req: IncomingMessage, res) => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  upstreamRequests.push({ path: req.url ?? '', body });
  const events = (text: string) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(text);
  const json = (answer: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
  if (req.url === '/v1/messages') {
    if (body.output_config !== undefined) return json(anthropicWeatherJson);
    if (afterToolResult(body) && body.stream !== true) return json(anthropicTextAnswer);
    if (body.thinking !== undefined) return body.stream === true ? events(ANTHROPIC_THINKING_STREAM) : json(anthropicThinkingAnswer);
    if (body.stream === true) return events(ANTHROPIC_TOOL_STREAM);
    return json(anthropicToolAnswer);
  }
  if (req.url === '/v1/chat/completions') {
    if (refuses(body)) return body.stream === true ? events(CHAT_REFUSAL_STREAM) : json(chatRefusal);
    if (body.response_format !== undefined) return json(openAIWeatherJson);
    if (afterToolResult(body) && body.stream !== true) return json(openAITextAnswer);
    if (body.stream === true)
      return events(isInterleavedCall(body) ? INTERLEAVED_TOOL_STREAM : Array.isArray(body.tools) ? OPENAI_TOOL_STREAM : OPENAI_TEXT_STREAM);
    return json(openAIToolAnswer);
  }
  // An upstream with the Responses API only, under its own path.
  if (req.url === '/responses-only/v1/responses') {
    if (refuses(body) && body.stream === true) return events(RESPONSES_REFUSAL_STREAM);
    if (body.stream === true) return events(RESPONSES_TOOL_STREAM);
    return json(responsesToolAnswer);
  }
  // The chat-only upstream has no Responses API, as vLLM's answer says.
  res.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}');
});
upstream.listen(0, '127.0.0.1');
await once(upstream, 'listening');
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

const gateway = await referenceApp({
  providers: [
    { id: 'chat-only', kind: 'openai', baseURL: `${upstreamUrl}/v1`, endpoints: ['chat.completions'] },
    { id: 'undeclared', kind: 'openai', baseURL: `${upstreamUrl}/v1` },
    { id: 'upstream-anthropic', kind: 'anthropic', baseURL: upstreamUrl },
    { id: 'responses-only', kind: 'openai', baseURL: `${upstreamUrl}/responses-only/v1`, endpoints: ['responses'] },
  ],
  models: [
    { id: 'gpt-mock', provider: 'chat-only', upstreamModel: 'gpt-upstream-2025' },
    { id: 'gpt-undeclared', provider: 'undeclared', upstreamModel: 'gpt-upstream-2025' },
    { id: 'claude-mock', provider: 'upstream-anthropic', upstreamModel: 'claude-upstream-2025' },
    { id: 'gpt-responses', provider: 'responses-only', upstreamModel: 'gpt-5' },
  ],
});
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
const pdf = makePdf(2, 300);
const openaiClient = (t: ExecutionContext<{ fetch: typeof fetch }>) =>
  new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0, fetch: t.context.fetch });
const anthropicClient = (t: ExecutionContext<{ fetch: typeof fetch }>) =>
  new Anthropic({ apiKey: key, baseURL: gateway.url, maxRetries: 0, fetch: t.context.fetch });
const lastUpstream = (path: string) => upstreamRequests.findLast((request) => request.path === path)?.body;

const weatherTool: OpenAI.Chat.ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather at a place',
    parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
  },
};

test.serial('openai SDK chat → anthropic provider: tools and a PDF, whole; the upstream gets a Messages request', async (t) => {
  const completion = await openaiClient(t).chat.completions.create({
    model: 'claude-mock',
    max_completion_tokens: 300,
    messages: [
      { role: 'system', content: 'Be brief.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Weather where the report says?' },
          { type: 'file', file: { filename: 'report.pdf', file_data: `data:application/pdf;base64,${pdf.toString('base64')}` } },
        ],
      },
    ],
    tools: [weatherTool],
    tool_choice: 'required',
  });
  t.is(completion.model, 'claude-mock');
  t.is(completion.id, 'msg_01Aq9w938a90dw8q');
  const [choice] = completion.choices;
  t.is(choice?.finish_reason, 'tool_calls');
  t.is(choice?.message.content, 'Checking both.');
  t.deepEqual(
    choice?.message.tool_calls?.map((call) => (call.type === 'function' ? [call.id, call.function.name, JSON.parse(call.function.arguments)] : [])),
    [
      ['toolu_01A', 'get_weather', { location: 'San Francisco, CA' }],
      ['toolu_01B', 'get_weather', { location: 'Paris, France' }],
    ],
  );
  t.like(completion.usage, { prompt_tokens: 472, completion_tokens: 60, total_tokens: 532, prompt_tokens_details: { cached_tokens: 72 } });
  t.deepEqual(lastUpstream('/v1/messages'), {
    model: 'claude-upstream-2025',
    max_tokens: 300,
    system: 'Be brief.',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Weather where the report says?' },
          { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: pdf.toString('base64') }, title: 'report.pdf' },
        ],
      },
    ],
    tools: [{ name: 'get_weather', description: 'The weather at a place', input_schema: weatherTool.function.parameters }],
    tool_choice: { type: 'any' },
  });
});

test.serial('openai SDK chat → anthropic provider, streamed: finalChatCompletion() has the text and both tool calls', async (t) => {
  const stream = openaiClient(t).chat.completions.stream({
    model: 'claude-mock',
    messages: [{ role: 'user', content: 'Weather in SF and Paris?' }],
    tools: [weatherTool],
    stream_options: { include_usage: true },
  });
  const final = await stream.finalChatCompletion();
  t.is(final.model, 'claude-mock');
  const [choice] = final.choices;
  t.is(choice?.finish_reason, 'tool_calls');
  t.is(choice?.message.content, "Okay, let's check the weather for San Francisco and Paris:");
  t.deepEqual(
    choice?.message.tool_calls?.map((call) => (call.type === 'function' ? [call.id, JSON.parse(call.function.arguments)] : [])),
    [
      ['toolu_01T1x1fJ34qAmk2tNTrN7Up6', { location: 'San Francisco, CA' }],
      ['toolu_01CqmTX3xBLRzWV2d1RSXvB9', { location: 'Paris, France' }],
    ],
  );
  t.like(final.usage, { prompt_tokens: 572, completion_tokens: 89, prompt_tokens_details: { cached_tokens: 100 } });
  t.like(lastUpstream('/v1/messages'), { stream: true, max_tokens: 4096 });
});

test.serial('openai SDK chat → anthropic provider: a tool result goes back as a tool_result block', async (t) => {
  await openaiClient(t).chat.completions.create({
    model: 'claude-mock',
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'toolu_01B', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Paris"}' } }],
      },
      { role: 'tool', tool_call_id: 'toolu_01B', content: '18°C, clear' },
    ],
    tools: [weatherTool],
  });
  t.deepEqual(lastUpstream('/v1/messages')?.messages, [
    { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_01B', name: 'get_weather', input: { location: 'Paris' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01B', content: [{ type: 'text', text: '18°C, clear' }] }] },
  ]);
});

test.serial('openai SDK chat → anthropic provider: logprobs is refused by name before anything is sent', async (t) => {
  const before = upstreamRequests.length;
  const err = await t.throwsAsync(
    openaiClient(t).chat.completions.create({ model: 'claude-mock', messages: [{ role: 'user', content: 'Hi' }], logprobs: true }),
    { instanceOf: OpenAI.BadRequestError },
  );
  t.regex(err?.message ?? '', /'logprobs'/);
  t.is(upstreamRequests.length, before);
});

test.serial('openai SDK responses → anthropic provider: whole and streamed, with a tool call', async (t) => {
  const client = openaiClient(t);
  const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'get_weather', parameters: weatherTool.function.parameters ?? null, strict: false }];
  const response = await client.responses.create({
    model: 'claude-mock',
    instructions: 'Be brief.',
    input: 'Weather in SF and Paris?',
    tools,
    max_output_tokens: 500,
  });
  t.is(response.model, 'claude-mock');
  t.is(response.output_text, 'Checking both.');
  t.deepEqual(
    response.output.flatMap((item) => (item.type === 'function_call' ? [[item.call_id, item.arguments]] : [])),
    [
      ['toolu_01A', '{"location":"San Francisco, CA"}'],
      ['toolu_01B', '{"location":"Paris, France"}'],
    ],
  );
  t.like(response.usage, { input_tokens: 472, output_tokens: 60, input_tokens_details: { cached_tokens: 72 } });
  t.like(lastUpstream('/v1/messages'), {
    system: 'Be brief.',
    max_tokens: 500,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Weather in SF and Paris?' }] }],
  });

  const final = await client.responses.stream({ model: 'claude-mock', input: 'Weather in SF and Paris?', tools }).finalResponse();
  t.is(final.status, 'completed');
  t.is(final.output_text, "Okay, let's check the weather for San Francisco and Paris:");
  t.deepEqual(
    final.output.flatMap((item) => (item.type === 'function_call' ? [JSON.parse(item.arguments)] : [])),
    [{ location: 'San Francisco, CA' }, { location: 'Paris, France' }],
  );
  t.like(final.usage, { input_tokens: 572, output_tokens: 89 });
});

test.serial('anthropic SDK messages → chat-only openai provider: tools, whole; the upstream gets a Chat Completions request', async (t) => {
  const message = await anthropicClient(t).messages.create({
    model: 'gpt-mock',
    max_tokens: 256,
    system: 'Be brief.',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Weather?' },
          { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: pdf.toString('base64') } },
        ],
      },
    ],
    tools: [{ name: 'get_weather', input_schema: { type: 'object', properties: { location: { type: 'string' } } } }],
    tool_choice: { type: 'auto', disable_parallel_tool_use: false },
  });
  t.is(message.model, 'gpt-mock');
  t.is(message.stop_reason, 'tool_use');
  t.deepEqual(
    message.content.map((block) => (block.type === 'tool_use' ? [block.id, block.input] : block.type)),
    [
      ['call_1', { location: 'Paris, France' }],
      ['call_2', { location: 'Bogotá, Colombia' }],
    ],
  );
  t.like(message.usage, { input_tokens: 18, cache_read_input_tokens: 64, output_tokens: 41 });
  t.deepEqual(lastUpstream('/v1/chat/completions'), {
    model: 'gpt-upstream-2025',
    messages: [
      { role: 'system', content: 'Be brief.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Weather?' },
          { type: 'file', file: { filename: 'document.pdf', file_data: `data:application/pdf;base64,${pdf.toString('base64')}` } },
        ],
      },
    ],
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { location: { type: 'string' } } } } }],
    tool_choice: 'auto',
    max_completion_tokens: 256,
  });
});

test.serial('anthropic SDK messages → chat-only openai provider, streamed: finalMessage() has both tool calls', async (t) => {
  const stream = anthropicClient(t).messages.stream({
    model: 'gpt-mock',
    max_tokens: 256,
    messages: [{ role: 'user', content: 'Weather in Paris and Bogotá?' }],
    tools: [{ name: 'get_weather', input_schema: { type: 'object', properties: { location: { type: 'string' } } } }],
  });
  const final = await stream.finalMessage();
  t.is(final.model, 'gpt-mock');
  t.is(final.stop_reason, 'tool_use');
  t.deepEqual(
    final.content.map((block) => (block.type === 'tool_use' ? [block.id, block.name, block.input] : block.type)),
    [
      ['call_DdmO9pD3xa9XTPNJ32zg2hcA', 'get_weather', { location: 'Paris, France' }],
      ['call_ABC987xyz', 'get_weather', { location: 'Bogotá, Colombia' }],
    ],
  );
  t.like(final.usage, { input_tokens: 18, cache_read_input_tokens: 64, output_tokens: 41 });
  t.like(lastUpstream('/v1/chat/completions'), { stream: true, stream_options: { include_usage: true } });
});

test.serial('anthropic SDK messages → openai provider, streamed text: the stop reason is mapped (length → max_tokens)', async (t) => {
  const final = await anthropicClient(t)
    .messages.stream({ model: 'gpt-mock', max_tokens: 6, messages: [{ role: 'user', content: 'Describe.' }] })
    .finalMessage();
  t.deepEqual(final.content, [{ type: 'text', text: 'The report has two pages.' }]);
  t.is(final.stop_reason, 'max_tokens');
  t.like(final.usage, { input_tokens: 20, output_tokens: 6 });
});

test.serial('anthropic SDK countTokens for a model without a counting endpoint: an estimate, no upstream call', async (t) => {
  const before = upstreamRequests.length;
  const counted = await anthropicClient(t).messages.countTokens({
    model: 'gpt-mock',
    system: 'Be brief.',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in this report?' },
          { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: pdf.toString('base64') } },
        ],
      },
    ],
  });
  // Two PDF pages at 2,000 tokens each, and a few tokens of text.
  t.true(counted.input_tokens > 4000 && counted.input_tokens < 4020, String(counted.input_tokens));
  t.is(upstreamRequests.length, before);
});

test.serial('anthropic SDK: thinking blocks sent back to an openai model are left out, named, for when the conversation goes back to Claude', async (t) => {
  const { data, response } = await anthropicClient(t)
    .messages.create({
      model: 'gpt-mock',
      max_tokens: 100,
      messages: [
        { role: 'user', content: 'Hi' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'Hmm.', signature: 'sig' },
            { type: 'text', text: 'Hello.' },
          ],
        },
        { role: 'user', content: 'Again?' },
      ],
    })
    .withResponse();
  t.is(data.model, 'gpt-mock');
  t.is(response.headers.get('x-kmg-omitted'), 'thinking');
  t.deepEqual(lastUpstream('/v1/chat/completions')?.messages, [
    { role: 'user', content: [{ type: 'text', text: 'Hi' }] },
    { role: 'assistant', content: 'Hello.' },
    { role: 'user', content: [{ type: 'text', text: 'Again?' }] },
  ]);
});

test.serial('an upstream without the path (404, no API error) is a non-retryable 404 naming it', async (t) => {
  const err = await t.throwsAsync(openaiClient(t).responses.create({ model: 'gpt-undeclared', input: 'Hi' }), { instanceOf: OpenAI.NotFoundError });
  t.regex(err?.message ?? '', /POST \/v1\/responses/);
  // Declared chat-only, the same upstream is translated to instead.
  const response = await openaiClient(t).responses.create({ model: 'gpt-mock', input: 'Hi' });
  t.is(response.status, 'completed');
  t.like(lastUpstream('/v1/chat/completions'), { messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }] });
});

test.serial('openai SDK chat → anthropic provider: a PDF attached by stored file id reaches Messages as a document block', async (t) => {
  const file = await openaiClient(t).files.create({ file: await toFile(pdf, 'lease.pdf', { type: 'application/pdf' }), purpose: 'user_data' });
  await openaiClient(t).chat.completions.create({
    model: 'claude-mock',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Summarise.' },
          { type: 'file', file: { file_id: file.id } },
        ],
      },
    ],
  });
  t.deepEqual(lastUpstream('/v1/messages')?.messages, [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Summarise.' },
        { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: pdf.toString('base64') }, title: 'lease.pdf' },
      ],
    },
  ]);
});

test.serial('anthropic SDK messages → openai provider: a document block by stored file id reaches Chat Completions as a file part', async (t) => {
  const file = await openaiClient(t).files.create({ file: await toFile(pdf, 'memo.pdf', { type: 'application/pdf' }), purpose: 'user_data' });
  await anthropicClient(t).messages.create({
    model: 'gpt-mock',
    max_tokens: 50,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Summarise.' }, { type: 'document', source: { type: 'file', file_id: file.id } } as never] }],
  });
  t.deepEqual(lastUpstream('/v1/chat/completions')?.messages, [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Summarise.' },
        { type: 'file', file: { filename: 'memo.pdf', file_data: `data:application/pdf;base64,${pdf.toString('base64')}` } },
      ],
    },
  ]);
});

test.serial('parallel calls whose arguments interleave reach a Messages and a Responses client each whole, every piece in its own call', async (t) => {
  const stream = anthropicClient(t).messages.stream({
    model: 'gpt-mock',
    max_tokens: 50,
    messages: [{ role: 'user', content: 'Both.' }],
    tools: [interleavedTool],
  });
  const stopped = new Set<number>();
  const lateDeltas: number[] = [];
  stream.on('streamEvent', (event) => {
    if (event.type === 'content_block_stop') stopped.add(event.index);
    if (event.type === 'content_block_delta' && stopped.has(event.index)) lateDeltas.push(event.index);
  });
  const message = await stream.finalMessage();
  t.deepEqual(
    message.content.map((block) => (block.type === 'tool_use' ? [block.id, block.input] : block.type)),
    [
      ['call_a', { city: 'Paris' }],
      ['call_b', { tz: 'CET' }],
    ],
  );
  t.deepEqual(lateDeltas, [], "no piece of a call's arguments after its block stopped");

  const response = await openaiClient(t)
    .responses.stream({
      model: 'gpt-mock',
      input: 'Both.',
      tools: [{ type: 'function', name: 'interleaved', parameters: { type: 'object', properties: {} }, strict: false }],
    })
    .finalResponse();
  t.deepEqual(
    response.output.map((item) => (item.type === 'function_call' ? [item.call_id, item.arguments] : item.type)),
    [
      ['call_a', '{"city":"Paris"}'],
      ['call_b', '{"tz":"CET"}'],
    ],
  );
});

test.serial("an OpenAI model's refusal stays a refusal across its two APIs, whole and streamed: never taken for the answer", async (t) => {
  const openai = openaiClient(t);
  // Chat Completions upstream, Responses client: a refusal part, which output_text does not count.
  const whole = await openai.responses.create({ model: 'gpt-mock', input: 'Help me break in.' });
  t.deepEqual(
    whole.output.flatMap((item) => (item.type === 'message' ? item.content : [])),
    [{ type: 'refusal', refusal: REFUSAL }],
  );
  t.is(whole.output_text, '');
  const stream = openai.responses.stream({ model: 'gpt-mock', input: 'Help me break in.' });
  const deltas: string[] = [];
  stream.on('response.refusal.delta', (event) => deltas.push(event.delta));
  const streamed = await stream.finalResponse();
  t.deepEqual(deltas, ["I can't ", 'help with that.']);
  t.deepEqual(
    streamed.output.flatMap((item) =>
      item.type === 'message' ? item.content.map((part) => [part.type, part.type === 'refusal' ? part.refusal : part.text]) : [],
    ),
    [['refusal', REFUSAL]],
  );
  // Responses upstream, Chat Completions client: the refusal's words in delta.refusal, so in message.refusal.
  const completion = await openai.chat.completions
    .stream({ model: 'gpt-responses', messages: [{ role: 'user', content: 'Help me break in.' }] })
    .finalChatCompletion();
  t.like(completion.choices[0]?.message, { refusal: REFUSAL });
  t.falsy(completion.choices[0]?.message.content);
});

// With an execute, as a user writes a tool; one step only (the default), so the upstream is called once.
const weather = tool({
  description: 'The weather at a place',
  inputSchema: z.object({ location: z.string() }),
  execute: async ({ location }) => `18°C in ${location}`,
});

test.serial('AI SDK: the OpenAI provider (Responses, and .chat()) on an anthropic model, with a tool', async (t) => {
  const openai = createOpenAI({ baseURL: `${gateway.url}/v1`, apiKey: key, fetch: t.context.fetch });
  const generated = await generateText({ model: openai('claude-mock'), prompt: 'Weather in SF and Paris?', tools: { get_weather: weather } });
  t.deepEqual(
    generated.toolCalls.map((call) => [call.toolName, call.input]),
    [
      ['get_weather', { location: 'San Francisco, CA' }],
      ['get_weather', { location: 'Paris, France' }],
    ],
  );
  t.is(generated.finishReason, 'tool-calls');
  const streamed = streamText({ model: openai.chat('claude-mock'), prompt: 'Weather in SF and Paris?', tools: { get_weather: weather } });
  t.deepEqual(
    (await streamed.toolCalls).map((call) => call.input),
    [{ location: 'San Francisco, CA' }, { location: 'Paris, France' }],
  );
  t.is(await streamed.text, "Okay, let's check the weather for San Francisco and Paris:");
  t.like(await streamed.usage, { inputTokens: 572, outputTokens: 89 });
});

test.serial('AI SDK: the Anthropic provider on a chat-only openai model, with a tool, generateText and streamText', async (t) => {
  const anthropic = createAnthropic({ baseURL: `${gateway.url}/v1`, apiKey: key, fetch: t.context.fetch });
  const generated = await generateText({ model: anthropic('gpt-mock'), prompt: 'Weather in Paris and Bogotá?', tools: { get_weather: weather } });
  t.deepEqual(
    generated.toolCalls.map((call) => call.input),
    [{ location: 'Paris, France' }, { location: 'Bogotá, Colombia' }],
  );
  t.is(generated.finishReason, 'tool-calls');
  const streamed = streamText({ model: anthropic('gpt-mock'), prompt: 'Weather in Paris and Bogotá?', tools: { get_weather: weather } });
  t.deepEqual(
    (await streamed.toolCalls).map((call) => [call.toolCallId, call.input]),
    [
      ['call_DdmO9pD3xa9XTPNJ32zg2hcA', { location: 'Paris, France' }],
      ['call_ABC987xyz', { location: 'Bogotá, Colombia' }],
    ],
  );
  t.is(await streamed.finishReason, 'tool-calls');
});

test.serial('anthropic SDK and openai chat → a provider with the Responses API only: streamed tool calls, and a refusal', async (t) => {
  const final = await anthropicClient(t)
    .messages.stream({
      model: 'gpt-responses',
      max_tokens: 500,
      messages: [{ role: 'user', content: 'Weather in Paris and Bogotá?' }],
      tools: [{ name: 'get_weather', input_schema: { type: 'object', properties: { location: { type: 'string' } } } }],
    })
    .finalMessage();
  t.is(final.model, 'gpt-responses');
  t.is(final.stop_reason, 'tool_use');
  t.deepEqual(
    final.content.map((block) => (block.type === 'tool_use' ? block.input : block.type === 'text' ? block.text : block.type)),
    ['Checking both.', { location: 'Paris, France' }, { location: 'Bogotá, Colombia' }],
  );
  t.like(lastUpstream('/responses-only/v1/responses'), { model: 'gpt-5', store: false, stream: true, max_output_tokens: 500 });

  const completion = await openaiClient(t).chat.completions.create({ model: 'gpt-responses', messages: [{ role: 'user', content: 'Something bad.' }] });
  t.like(completion.choices[0], { finish_reason: 'content_filter', message: { content: null, refusal: "I can't help with that." } });
});

test.serial('LangChain: ChatOpenAI (Chat Completions) on an anthropic model and ChatAnthropic on an openai model, invoke and stream', async (t) => {
  const openai = new ChatOpenAI({ model: 'claude-mock', apiKey: key, maxRetries: 0, configuration: { baseURL: `${gateway.url}/v1`, fetch: t.context.fetch } });
  const answer = await openai.invoke('Weather?');
  t.is(answer.text, 'Checking both.');
  let streamed = '';
  for await (const chunk of await openai.stream('Weather?')) streamed += chunk.text;
  t.is(streamed, "Okay, let's check the weather for San Francisco and Paris:");

  const anthropic = new ChatAnthropic({
    model: 'gpt-mock',
    apiKey: key,
    maxRetries: 0,
    anthropicApiUrl: gateway.url,
    clientOptions: { fetch: t.context.fetch },
  });
  let text = '';
  for await (const chunk of await anthropic.stream('Describe.')) text += chunk.text;
  t.is(text, 'The report has two pages.');
});

test.serial('openai SDK chat.completions.parse() → anthropic provider: the zod schema goes as structured outputs, the answer comes back parsed', async (t) => {
  const completion = await openaiClient(t).chat.completions.parse({
    model: 'claude-mock',
    messages: [{ role: 'user', content: 'The weather in Paris, as JSON.' }],
    response_format: zodResponseFormat(weatherSchema, 'weather'),
  });
  t.deepEqual(completion.choices[0]?.message.parsed, { city: 'Paris', temperature_c: 18 });
  const sent = lastUpstream('/v1/messages');
  t.like(sent?.output_config, { format: { type: 'json_schema', schema: { type: 'object', required: ['city', 'temperature_c'] } } });
  t.is(sent?.response_format, undefined);
});

test.serial(
  '@anthropic-ai/sdk messages.parse() → openai provider: output_config.format goes as a strict json_schema, the answer comes back parsed',
  async (t) => {
    const message = await anthropicClient(t).messages.parse({
      model: 'gpt-mock',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'The weather in Paris, as JSON.' }],
      output_config: { format: zodOutputFormat(weatherSchema) },
    });
    t.deepEqual(message.parsed_output, { city: 'Paris', temperature_c: 18 });
    t.like(lastUpstream('/v1/chat/completions')?.response_format, {
      type: 'json_schema',
      json_schema: { name: 'response', strict: true, schema: { type: 'object' } },
    });
  },
);

// The tool loops of the SDKs, as their users write them, on a translated model each way: what the
// gateway answered, and what each SDK adds to it, goes back as the next turn's history.

test.serial(
  'openai SDK tool loop → anthropic provider: the message pushed back as the SDK hands it, whole and after .stream().finalChatCompletion()',
  async (t) => {
    const client = openaiClient(t);
    const question: OpenAI.Chat.ChatCompletionMessageParam = { role: 'user', content: 'Weather in SF and Paris?' };
    const loop = async (message: OpenAI.Chat.ChatCompletionMessage) => {
      const results = (message.tool_calls ?? []).map(
        (call): OpenAI.Chat.ChatCompletionMessageParam => ({
          role: 'tool',
          tool_call_id: call.id,
          content: '18°C',
        }),
      );
      t.is(results.length, 2);
      const next = await client.chat.completions.create({ model: 'claude-mock', messages: [question, message, ...results], tools: [weatherTool] });
      t.is(next.choices[0]?.message.content, 'Sunny everywhere.');
      t.like(lastUpstream('/v1/messages')?.messages, [
        { role: 'user' },
        { role: 'assistant' },
        { role: 'user', content: [{ type: 'tool_result' }, { type: 'tool_result' }] },
      ]);
    };
    const whole = await client.chat.completions.create({ model: 'claude-mock', messages: [question], tools: [weatherTool] });
    await loop(whole.choices[0]!.message);
    const streamed = await client.chat.completions.stream({ model: 'claude-mock', messages: [question], tools: [weatherTool] }).finalChatCompletion();
    await loop(streamed.choices[0]!.message);
  },
);

test.serial('openai SDK responses tool loop → anthropic provider: the output items pushed back as the SDK hands them', async (t) => {
  const client = openaiClient(t);
  const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'get_weather', parameters: weatherTool.function.parameters ?? null, strict: false }];
  const first = await client.responses.create({ model: 'claude-mock', input: 'Weather in SF and Paris?', tools });
  const results = first.output.flatMap((item): OpenAI.Responses.ResponseInputItem[] =>
    item.type === 'function_call' ? [{ type: 'function_call_output', call_id: item.call_id, output: '18°C' }] : [],
  );
  const question: OpenAI.Responses.ResponseInputItem = { role: 'user', content: 'Weather in SF and Paris?' };
  const next = await client.responses.create({
    model: 'claude-mock',
    input: [question, ...(first.output as OpenAI.Responses.ResponseInputItem[]), ...results],
    tools,
  });
  t.is(next.output_text, 'Sunny everywhere.');
});

test.serial('openai SDK runTools → anthropic provider: the loop runs the tool and ends on the answer', async (t) => {
  const ran: string[] = [];
  const runner = openaiClient(t).chat.completions.runTools({
    model: 'claude-mock',
    messages: [{ role: 'user', content: 'Weather in SF and Paris?' }],
    tools: [
      {
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'The weather at a place',
          parameters: { type: 'object', properties: { location: { type: 'string' } } },
          parse: (input: string) => JSON.parse(input) as { location: string },
          function: ({ location }: { location: string }) => {
            ran.push(location);
            return '18°C';
          },
        },
      },
    ],
  });
  t.is(await runner.finalContent(), 'Sunny everywhere.');
  t.deepEqual(ran, ['San Francisco, CA', 'Paris, France']);
});

// Without a thread (`thread: false`): a message thread is a conversation Anthropic stores, which no
// other provider keeps; the runner's own fallback needs error details Shape B does not have.
test.serial('anthropic SDK toolRunner (thread: false) → chat-only openai provider: the loop runs the tool and ends on the answer', async (t) => {
  const ran: string[] = [];
  const final = await anthropicClient(t).beta.messages.toolRunner({
    thread: false,
    model: 'gpt-mock',
    max_tokens: 200,
    messages: [{ role: 'user', content: 'Weather in Paris and Bogotá?' }],
    tools: [
      betaTool({
        name: 'get_weather',
        description: 'The weather at a place',
        inputSchema: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
        run: ({ location }) => {
          ran.push(location);
          return '18°C';
        },
      }),
    ],
  });
  t.deepEqual(
    final.content.map((block) => (block.type === 'text' ? block.text : block.type)),
    ['Sunny everywhere.'],
  );
  t.deepEqual(ran, ['Paris, France', 'Bogotá, Colombia']);
});

test.serial('AI SDK stopWhen: a multi-step tool loop on a translated model each way', async (t) => {
  const openai = createOpenAI({ baseURL: `${gateway.url}/v1`, apiKey: key, fetch: t.context.fetch });
  const anthropic = createAnthropic({ baseURL: `${gateway.url}/v1`, apiKey: key, fetch: t.context.fetch });
  for (const model of [openai('claude-mock'), openai.chat('claude-mock'), anthropic('gpt-mock')]) {
    // On the Responses API, without OpenAI's store: the earlier turns go back whole, not as
    // references to stored items, which only the provider that stored them could follow.
    const generated = await generateText({
      model,
      prompt: 'Weather?',
      tools: { get_weather: weather },
      stopWhen: stepCountIs(3),
      providerOptions: { openai: { store: false } },
    });
    t.is(generated.steps.length, 2, model.modelId);
    t.is(generated.text, 'Sunny everywhere.', model.modelId);
  }
});

test.serial('LangChain bindTools: a tool loop on a translated model each way', async (t) => {
  const models = [
    new ChatOpenAI({ model: 'claude-mock', apiKey: key, maxRetries: 0, configuration: { baseURL: `${gateway.url}/v1`, fetch: t.context.fetch } }),
    new ChatAnthropic({ model: 'gpt-mock', apiKey: key, maxRetries: 0, anthropicApiUrl: gateway.url, clientOptions: { fetch: t.context.fetch } }),
  ];
  for (const model of models) {
    const bound = model.bindTools([weatherTool]);
    const question = new HumanMessage('Weather?');
    const called = await bound.invoke([question]);
    t.is(called.tool_calls?.length, 2);
    const results = (called.tool_calls ?? []).map((call) => new ToolMessage({ tool_call_id: call.id ?? '', content: '18°C' }));
    const answered = await bound.invoke([question, called, ...results]);
    t.is(answered.text, 'Sunny everywhere.');
  }
});

test.serial(
  'anthropic SDK beta.messages.parse() on a model of an openai provider: its own structured-outputs beta and output_format are carried',
  async (t) => {
    const message = await anthropicClient(t).beta.messages.parse({
      model: 'gpt-mock',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'The weather in Paris, as JSON.' }],
      output_format: betaZodOutputFormat(weatherSchema),
    });
    t.deepEqual(message.parsed_output, { city: 'Paris', temperature_c: 18 });
    t.like(lastUpstream('/v1/chat/completions')?.response_format, { type: 'json_schema', json_schema: { strict: true } });
  },
);

test.serial('anthropic SDK beta.messages.countTokens() on a model of an openai provider: its own token-counting beta is accepted', async (t) => {
  const counted = await anthropicClient(t).beta.messages.countTokens({ model: 'gpt-mock', messages: [{ role: 'user', content: 'Hello there, how are you?' }] });
  t.true(counted.input_tokens > 0);
});

test.serial(
  "openai SDK with reasoning_effort → anthropic provider: Claude's signed thinking comes back in thinking_blocks and goes back with the tool loop, whole and streamed",
  async (t) => {
    const client = openaiClient(t);
    const question: OpenAI.Chat.ChatCompletionMessageParam = { role: 'user', content: 'Weather in SF and Paris?' };
    const whole = await client.chat.completions.create({ model: 'claude-mock', reasoning_effort: 'low', messages: [question], tools: [weatherTool] });
    const message = whole.choices[0]!.message;
    t.like(message, { reasoning_content: 'Both cities.', thinking_blocks: [{ type: 'thinking', thinking: 'Both cities.', signature: 'sig-both' }] } as object);
    const results = (message.tool_calls ?? []).map(
      (call): OpenAI.Chat.ChatCompletionMessageParam => ({
        role: 'tool',
        tool_call_id: call.id,
        content: '18°C',
      }),
    );
    const next = await client.chat.completions
      .create({ model: 'claude-mock', reasoning_effort: 'low', messages: [question, message, ...results], tools: [weatherTool] })
      .withResponse();
    t.is(next.response.headers.get('x-kmg-omitted'), null, 'thinking stays on: its signed thinking came back');
    const sent = lastUpstream('/v1/messages');
    t.like(sent, { thinking: { type: 'enabled', budget_tokens: 2048 } });
    t.like((sent!.messages as unknown[])[1], {
      role: 'assistant',
      content: [{ type: 'thinking', thinking: 'Both cities.', signature: 'sig-both' }, { type: 'text' }, { type: 'tool_use' }],
    });

    const streamed = await client.chat.completions.stream({ model: 'claude-mock', reasoning_effort: 'low', messages: [question] }).finalChatCompletion();
    const thought = streamed.choices[0]!.message;
    t.like(thought, {
      content: 'Two.',
      thinking_blocks: [{ type: 'thinking', thinking: 'Two pages, so: two.', signature: 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds' }],
    } as object);
    await client.chat.completions.create({
      model: 'claude-mock',
      reasoning_effort: 'low',
      messages: [question, thought, { role: 'user', content: 'And Bogotá?' }],
    });
    t.like((lastUpstream('/v1/messages')!.messages as unknown[])[1], {
      content: [
        { type: 'thinking', signature: 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds' },
        { type: 'text', text: 'Two.' },
      ],
    });
  },
);
