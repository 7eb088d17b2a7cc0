import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import Anthropic from '@anthropic-ai/sdk';
import { generateText, stepCountIs, tool } from 'ai';
import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import OpenAI from 'openai';
import { z } from 'zod';
import { checkedFetch } from '../helpers/openapi.js';
import { referenceApp } from '../helpers/reference-app.js';

// A tool loop against the offline echo models, through the clients' own accumulators: each client
// assembles the streamed call itself, and every answer is checked against docs/openapi.json.

const test = anyTest as TestFn<{ problems: string[]; fetch: typeof fetch }>;

const gateway = await referenceApp({ models: [{ id: 'echo-1', provider: 'echo' }] });
test.after.always(() => gateway.close());
test.beforeEach((t) => {
  t.context.problems = [];
  t.context.fetch = checkedFetch(t.context.problems);
});
test.afterEach((t) => t.deepEqual(t.context.problems, [], 'every answer agrees with docs/openapi.json'));

const key = await gateway.keyFor();
type Context = ExecutionContext<{ fetch: typeof fetch }>;
const openaiClient = (t: Context) => new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0, fetch: t.context.fetch });
const anthropicClient = (t: Context) => new Anthropic({ apiKey: key, baseURL: gateway.url, maxRetries: 0, fetch: t.context.fetch });

const weatherParameters = {
  type: 'object',
  properties: {
    city: { type: 'string' },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1 },
    detailed: { type: 'boolean' },
    where: { type: 'object', properties: { lat: { type: 'number' }, note: { type: 'string' } }, required: ['lat'] },
    tags: { type: 'array', items: { type: 'string' } },
    optional: { type: 'string' },
  },
  required: ['city', 'unit', 'days', 'detailed', 'where', 'tags'],
};
const weatherArguments = { city: 'echo', unit: 'celsius', days: 1, detailed: true, where: { lat: 0 }, tags: [] };

test('openai SDK: chat.completions.stream accumulates the call, and a tool message ends the loop', async (t) => {
  const client = openaiClient(t);
  const tools: OpenAI.Chat.ChatCompletionTool[] = [{ type: 'function', function: { name: 'get_weather', parameters: weatherParameters } }];
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
  const completion = await client.chat.completions.stream({ model: 'echo-1', messages, tools }).finalChatCompletion();
  const choice = completion.choices[0];
  t.is(choice?.finish_reason, 'tool_calls');
  const call = choice?.message.tool_calls?.[0];
  t.is(call?.type, 'function');
  if (call?.type !== 'function') return;
  t.is(call.function.name, 'get_weather');
  t.deepEqual(JSON.parse(call.function.arguments), weatherArguments);

  messages.push(choice!.message, { role: 'tool', tool_call_id: call.id, content: 'Sunny, 21 degrees' });
  const answer = await client.chat.completions.stream({ model: 'echo-1', messages, tools }).finalChatCompletion();
  t.is(answer.choices[0]?.finish_reason, 'stop');
  t.regex(answer.choices[0]?.message.content ?? '', /The tool result says: "Sunny, 21 degrees"/);
});

test('openai SDK: responses.stream gives a function_call item, and its output ends the loop', async (t) => {
  const client = openaiClient(t);
  const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'get_weather', parameters: weatherParameters, strict: false }];
  const input: OpenAI.Responses.ResponseInput = [{ role: 'user', content: 'Weather in Paris?' }];
  const stream = client.responses.stream({ model: 'echo-1', input, tools });
  const deltas: string[] = [];
  stream.on('response.function_call_arguments.delta', (event) => deltas.push(event.delta));
  const response = await stream.finalResponse();
  const call = response.output[0];
  t.is(call?.type, 'function_call');
  if (call?.type !== 'function_call') return;
  t.is(call.name, 'get_weather');
  t.deepEqual(JSON.parse(call.arguments), weatherArguments);
  t.true(deltas.length > 1, 'the arguments arrive in pieces');
  t.is(deltas.join(''), call.arguments);

  input.push(call, { type: 'function_call_output', call_id: call.call_id, output: 'Sunny, 21 degrees' });
  const answer = await client.responses.stream({ model: 'echo-1', input, tools }).finalResponse();
  t.is(answer.output[0]?.type, 'message');
  t.regex(answer.output_text, /The tool result says: "Sunny, 21 degrees"/);
});

test('Anthropic SDK: messages.stream accumulates the tool_use input, and a tool_result ends the loop', async (t) => {
  const client = anthropicClient(t);
  const tools: Anthropic.Tool[] = [{ name: 'get_weather', input_schema: { ...weatherParameters, type: 'object' } }];
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
  const message = await client.messages.stream({ model: 'echo-1', max_tokens: 100, messages, tools }).finalMessage();
  t.is(message.stop_reason, 'tool_use');
  const block = message.content[0];
  t.is(block?.type, 'tool_use');
  if (block?.type !== 'tool_use') return;
  t.is(block.name, 'get_weather');
  t.deepEqual(block.input, weatherArguments);

  messages.push(
    { role: 'assistant', content: message.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: block.id, content: 'Sunny, 21 degrees' }] },
  );
  const answer = await client.messages.stream({ model: 'echo-1', max_tokens: 100, messages, tools }).finalMessage();
  t.is(answer.stop_reason, 'end_turn');
  t.like(answer.content[0], { type: 'text' });
  t.regex(answer.content[0]?.type === 'text' ? answer.content[0].text : '', /The tool result says: "Sunny, 21 degrees"/);
});

/** A tool as AI SDK users write one, recording the inputs it was called with. */
function weatherTool(calls: unknown[]) {
  return tool({
    description: 'The weather in a city',
    inputSchema: z.object({ city: z.string(), days: z.number().int() }),
    execute: async (input) => {
      calls.push(input);
      return 'Sunny, 21 degrees';
    },
  });
}

for (const [name, model] of [
  ['OpenAI Responses', (fetch: typeof globalThis.fetch) => createOpenAI({ baseURL: `${gateway.url}/v1`, apiKey: key, fetch }).responses('echo-1')],
  ['OpenAI Chat Completions', (fetch: typeof globalThis.fetch) => createOpenAI({ baseURL: `${gateway.url}/v1`, apiKey: key, fetch }).chat('echo-1')],
  ['Anthropic', (fetch: typeof globalThis.fetch) => createAnthropic({ baseURL: `${gateway.url}/v1`, apiKey: key, fetch })('echo-1')],
] as const) {
  test(`AI SDK (${name}): generateText runs a two-step tool loop to its end`, async (t) => {
    const calls: unknown[] = [];
    const result = await generateText({
      model: model(t.context.fetch),
      prompt: 'Weather in Paris?',
      maxOutputTokens: 100,
      tools: { get_weather: weatherTool(calls) },
      stopWhen: stepCountIs(5),
    });
    t.deepEqual(calls, [{ city: 'echo', days: 0 }]);
    t.is(result.steps.length, 2);
    t.is(result.steps[0]?.finishReason, 'tool-calls');
    t.is(result.finishReason, 'stop');
    t.regex(result.text, /The tool result says: .*Sunny, 21 degrees/);
  });
}
