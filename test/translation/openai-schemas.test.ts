import { readdir, readFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import test from 'ava';
import { errors, type GatewayError } from '../../lib/errors/gateway-error.js';
import { shapeABody } from '../../lib/errors/openai-errors.js';
import { EventSplitter, eventFields } from '../../lib/http/server-sent-events.js';
import type { Provider } from '../../lib/models/provider.js';
import { catalogProviders, modelsApp } from '../helpers/models-app.js';
import { openAIProblems, type OpenAISchema } from '../helpers/openai-schemas.js';

// Every answer the gateway writes itself, checked against OpenAI's published schemas
// (test/fixtures/openai-openapi/): the echo provider's, the translated ones of the conformance
// table, and the Shape A error bodies.

// The conformance table's expected answers are what the translation writes (conformance.test.ts).
const DIR = new URL('../../../test/fixtures/translation/', import.meta.url);
const cases = await Promise.all(
  (await readdir(DIR))
    .filter((name) => name.endsWith('.case.json'))
    .sort()
    .map(async (file) => ({ file, fixture: JSON.parse(await readFile(new URL(file, DIR), 'utf8')) as { client: string; answer?: unknown; events?: string } })),
);
// The anthropic provider's upstream fails mid-stream: the gateway ends the client's stream with its own error event.
const failingMidStream: Provider = {
  id: 'anthropic',
  messages: async () => ({
    statusCode: 200,
    headers: { 'content-type': 'text/event-stream' },
    body: Readable.from([
      'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}\n\n',
      'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}\n\n',
      'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
    ]),
  }),
};
const gateway = await modelsApp({ providers: [...catalogProviders().filter((provider) => provider.id !== 'anthropic'), failingMidStream] });
test.after.always(() => gateway.close());
const key = await gateway.keyFor();
const auth = { authorization: `Bearer ${key}` };

/** The JSON data of each event of a stream (`[DONE]` left out). */
const eventData = (text: string) =>
  new EventSplitter()
    .push(text)
    .map((event) => eventFields(event).data ?? '')
    .filter((data) => data.startsWith('{'))
    .map((data) => JSON.parse(data) as unknown);

function problemsOf(text: string, streamed: boolean, json: OpenAISchema, event: OpenAISchema): string[] {
  if (!streamed) return openAIProblems(json, JSON.parse(text));
  const data = eventData(text);
  return data.length === 0 ? ['no event'] : data.flatMap((item) => openAIProblems(event, item));
}

const tool = { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };

const echoCalls = [
  { what: 'a text answer', chat: {}, responses: {} },
  {
    what: 'a tool call',
    chat: { tools: [{ type: 'function', function: tool }], tool_choice: 'required' },
    responses: { tools: [{ type: 'function', ...tool }], tool_choice: 'required' },
  },
];

for (const { what, chat, responses } of echoCalls) {
  for (const stream of [false, true]) {
    const how = stream ? 'every streamed event' : 'the JSON answer';
    test(`echo, Chat Completions, ${what}: ${how} is OpenAI's`, async (t) => {
      const body = { model: 'echo-1', messages: [{ role: 'user', content: 'Hello there' }], stream, ...(stream && { stream_options: { include_usage: true } }), ...chat };
      const response = await gateway.post('/v1/chat/completions', body, auth);
      t.is(response.status, 200);
      t.deepEqual(problemsOf(await response.text(), stream, 'CreateChatCompletionResponse', 'CreateChatCompletionStreamResponse'), []);
    });

    test(`echo, Responses, ${what}: ${how} is OpenAI's`, async (t) => {
      const response = await gateway.post('/v1/responses', { model: 'echo-1', input: 'Hello there', instructions: 'Be brief.', stream, ...responses }, auth);
      t.is(response.status, 200);
      t.deepEqual(problemsOf(await response.text(), stream, 'Response', 'ResponseStreamEvent'), []);
    });
  }
}

const SCHEMAS: Record<string, [OpenAISchema, OpenAISchema]> = {
  chatCompletions: ['CreateChatCompletionResponse', 'CreateChatCompletionStreamResponse'],
  responses: ['Response', 'ResponseStreamEvent'],
};

for (const { file, fixture } of cases) {
  const schemas = SCHEMAS[fixture.client];
  if (schemas === undefined) continue;
  test(`translated answer of ${file} is OpenAI's`, async (t) => {
    const text = fixture.events === undefined ? JSON.stringify(fixture.answer) : await readFile(new URL(fixture.events, DIR), 'utf8');
    t.deepEqual(problemsOf(text, fixture.events !== undefined, ...schemas), []);
  });
}

test("every error the gateway defines, in Shape A, is OpenAI's ErrorResponse", (t) => {
  const made = Object.values(errors).map((make) => (make as (...args: unknown[]) => GatewayError)('x', 'y', 'z'));
  t.deepEqual(made.flatMap((err) => openAIProblems('ErrorResponse', shapeABody(err))), []);
});

test("error bodies of the model endpoints are OpenAI's ErrorResponse", async (t) => {
  const answers = await Promise.all([
    gateway.post('/v1/chat/completions', { model: 'nope', messages: [] }, auth),
    gateway.post('/v1/chat/completions', { model: 'claude-test', messages: [{ role: 'user', content: 'hi' }], logprobs: true }, auth),
    gateway.post('/v1/responses', { model: 'claude-test', input: 'hi', text: { format: { type: 'json_object' } } }, auth),
    gateway.post('/v1/responses', { model: 'echo-1', input: 'hi' }),
  ]);
  t.deepEqual(
    answers.map((answer) => answer.status),
    [404, 400, 400, 401],
  );
  const bodies = await Promise.all(answers.map((answer) => answer.json()));
  t.deepEqual(bodies.flatMap((body) => openAIProblems('ErrorResponse', body)), []);
});

test('a stream that fails after it started ends with an error event of the client\'s schema', async (t) => {
  const chat = await gateway.post('/v1/chat/completions', { model: 'claude-test', messages: [{ role: 'user', content: 'hi' }], stream: true }, auth);
  const chatEvents = eventData(await chat.text());
  t.true(chatEvents.some((event) => typeof event === 'object' && event !== null && 'error' in event), 'the Chat Completions stream ends with an error');
  t.deepEqual(chatEvents.flatMap((event) => openAIProblems('error' in (event as object) ? 'ErrorResponse' : 'CreateChatCompletionStreamResponse', event)), []);
  const responses = await gateway.post('/v1/responses', { model: 'claude-test', input: 'hi', stream: true }, auth);
  const responsesEvents = eventData(await responses.text());
  t.like(responsesEvents.at(-1), { type: 'error' });
  t.deepEqual(responsesEvents.flatMap((event) => openAIProblems('ResponseStreamEvent', event)), []);
});
