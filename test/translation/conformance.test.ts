import { readdirSync, readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import test from 'ava';
import { errors, type GatewayError } from '../../lib/errors/gateway-error.js';
import { shapeABody } from '../../lib/errors/openai-errors.js';
import { EventSplitter, eventFields } from '../../lib/http/server-sent-events.js';
import { readChatAnswer, writeChatAnswer } from '../../lib/models/formats/chat-completions/answer.js';
import { FROM_CHAT_FINISH, TO_CHAT_FINISH } from '../../lib/models/formats/chat-completions/finish-reasons.js';
import { readMessagesAnswer, writeMessagesAnswer } from '../../lib/models/formats/messages/answer.js';
import type { Answer, FinishReason } from '../../lib/models/formats/neutral.js';
import { writeResponsesAnswer } from '../../lib/models/formats/responses/answer.js';
import { translation } from '../../lib/models/formats/translate.js';
import type { Provider, ProviderEndpoint } from '../../lib/models/provider.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { createProvider } from '../../lib/models/providers/registry.js';
import { catalogProviders, modelsApp, type ModelsApp } from '../helpers/models-app.js';
import { openAIProblems, type OpenAISchema } from '../helpers/openai-schemas.js';

// What the translation between the formats must give: the conformance table of recorded cases,
// the stop and finish reason tables, the endpoints an openai provider speaks, and OpenAI's
// published schemas for every answer the gateway writes itself.

// The conformance table: each test/fixtures/translation/*.case.json is a request in the client's
// format and the request the provider must get in its own; the provider's answer (JSON, or a
// recorded event stream) and what the client must get back. The upstream's bytes arrive in
// pieces of 7 bytes, so that events, lines and characters are cut everywhere.
// UPDATE_FIXTURES=1 writes the expected answers of new cases, to be read before they are kept.

const DIR = new URL('../../../test/fixtures/translation/', import.meta.url);

interface Case {
  reproduces: string;
  client: ProviderEndpoint;
  provider: ProviderEndpoint;
  request: Record<string, unknown>;
  upstreamRequest: Record<string, unknown>;
  upstreamAnswer?: Record<string, unknown>;
  answer?: Record<string, unknown>;
  upstreamEvents?: string;
  events?: string;
}

const pieces = (text: string) => {
  const bytes = Buffer.from(text);
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += 7) out.push(bytes.subarray(at, at + 7));
  return out;
};

// What differs from run to run: the clock, and the item ids a Responses answer is given.
const normalized = (text: string) => text.replace(/"(created|created_at)":\d+/g, '"$1":0').replace(/"(msg|fc|rs)_[0-9a-f]{24}"/g, '"$1_ID"');

const events = (text: string) => new EventSplitter().push(text).map((event) => event.trim());

const files = readdirSync(DIR)
  .filter((name) => name.endsWith('.case.json'))
  .sort();
const fixtures = files.map((file) => [file, JSON.parse(readFileSync(new URL(file, DIR), 'utf8')) as Case] as const);

// The gateway of the schema checks below. Its anthropic provider's upstream fails mid-stream: the
// gateway ends the client's stream with its own error event.
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
let gateway: ModelsApp;
let auth: { authorization: string };
test.before(async () => {
  gateway = await modelsApp({ providers: [...catalogProviders().filter((provider) => provider.id !== 'anthropic'), failingMidStream] });
  auth = { authorization: `Bearer ${await gateway.keyFor()}` };
});
test.after.always(() => gateway?.close());

for (const [file, fixture] of fixtures) {
  test(`${file}: ${fixture.reproduces}`, async (t) => {
    let sent: unknown;
    const upstreamText = fixture.upstreamEvents ? await readFile(new URL(fixture.upstreamEvents, DIR), 'utf8') : JSON.stringify(fixture.upstreamAnswer);
    const provider: Provider = {
      id: 'upstream',
      [fixture.provider]: async ({ body }: { body: unknown }) => {
        sent = body;
        const type = fixture.upstreamEvents ? 'text/event-stream' : 'application/json';
        return { statusCode: 200, headers: { 'content-type': type }, body: Readable.from(pieces(upstreamText)) };
      },
    };
    const translated = translation(fixture.client, provider);
    if (translated === undefined) return t.fail(`no translation from ${fixture.client} to ${fixture.provider}`);
    t.is(translated.target, fixture.provider);
    t.notThrows(() => translated.check(fixture.request, {}));
    const answer = await translated.send({ body: fixture.request, headers: {}, signal: new AbortController().signal });
    t.deepEqual(sent, fixture.upstreamRequest, 'the request the provider gets');
    const chunks: Buffer[] = [];
    for await (const chunk of answer.body) chunks.push(Buffer.from(chunk as Buffer));
    const text = normalized(Buffer.concat(chunks).toString('utf8'));
    if (fixture.upstreamEvents) {
      const expectedFile = new URL(fixture.events ?? '', DIR);
      if (process.env.UPDATE_FIXTURES && !(await readFile(expectedFile, 'utf8').catch(() => ''))) await writeFile(expectedFile, text);
      t.deepEqual(events(text), events(await readFile(expectedFile, 'utf8')), 'the events the client gets');
    } else {
      if (process.env.UPDATE_FIXTURES && fixture.answer === undefined) {
        await writeFile(new URL(file, DIR), `${JSON.stringify({ ...fixture, answer: JSON.parse(text) as unknown }, null, 2)}\n`);
      }
      t.deepEqual(JSON.parse(text), fixture.answer, 'the answer the client gets');
    }
  });
}

// One test per row of each stop/finish reason table, through the answer readers and writers that
// use them: what an upstream says is what the client reads.

const neutralAnswer = (finishReason: FinishReason, stopSequence?: string): Answer => ({
  id: 'id',
  model: 'm',
  created: 0,
  content: [{ type: 'text', text: 'x' }],
  finishReason,
  ...(stopSequence !== undefined && { stopSequence }),
  usage: { inputTokens: 1, outputTokens: 1 },
});

const fromMessages: Array<[string, FinishReason]> = [
  ['end_turn', 'stop'],
  ['max_tokens', 'length'],
  ['model_context_window_exceeded', 'length'],
  ['tool_use', 'tool-calls'],
  ['stop_sequence', 'stop-sequence'],
  ['refusal', 'refusal'],
  ['pause_turn', 'pause'],
];
test('a Messages stop_reason it does not know, or none, reads as other', (t) => {
  for (const stopReason of ['a_reason_of_next_year', null])
    t.is(readMessagesAnswer({ content: [], stop_reason: stopReason, stop_sequence: null }).finishReason, 'other');
});
for (const [stopReason, neutral] of fromMessages) {
  test(`Messages stop_reason ${stopReason} reads as ${neutral}`, (t) => {
    t.is(readMessagesAnswer({ content: [], stop_reason: stopReason, stop_sequence: stopReason === 'stop_sequence' ? 'END' : null }).finishReason, neutral);
  });
}
test('a Messages stop sequence keeps its value', (t) => {
  t.is(readMessagesAnswer({ content: [], stop_reason: 'stop_sequence', stop_sequence: '###' }).stopSequence, '###');
  t.like(writeMessagesAnswer(neutralAnswer('stop-sequence', '###')), { stop_reason: 'stop_sequence', stop_sequence: '###' });
});

// A record of every neutral reason: the compiler fails on one added without its row here.
const toMessages: Record<FinishReason, string> = {
  stop: 'end_turn',
  length: 'max_tokens',
  'tool-calls': 'tool_use',
  'stop-sequence': 'stop_sequence',
  'content-filter': 'refusal',
  refusal: 'refusal',
  pause: 'pause_turn',
  other: 'end_turn',
};
test('every stop_reason written is one a Messages client knows: read back, none is other', (t) => {
  for (const neutral of Object.keys(toMessages) as FinishReason[]) {
    const { stop_reason } = writeMessagesAnswer(neutralAnswer(neutral, neutral === 'stop-sequence' ? '###' : undefined));
    t.not(readMessagesAnswer({ content: [], stop_reason, stop_sequence: null }).finishReason, 'other', `${neutral} → ${String(stop_reason)}`);
  }
});
for (const [neutral, stopReason] of Object.entries(toMessages) as Array<[FinishReason, string]>) {
  test(`${neutral} is written as Messages stop_reason ${stopReason}`, (t) => t.is(writeMessagesAnswer(neutralAnswer(neutral)).stop_reason, stopReason));
}

const fromChat: Array<[string, FinishReason]> = [
  ['stop', 'stop'],
  ['length', 'length'],
  ['tool_calls', 'tool-calls'],
  ['function_call', 'tool-calls'],
  ['content_filter', 'content-filter'],
];
test('the Chat Completions finish_reason table has exactly the rows tested', (t) => t.deepEqual(Object.entries(FROM_CHAT_FINISH), fromChat));
for (const [finishReason, neutral] of fromChat) {
  test(`Chat Completions finish_reason ${finishReason} reads as ${neutral}`, (t) => {
    t.is(readChatAnswer({ choices: [{ index: 0, message: { role: 'assistant', content: 'x' }, finish_reason: finishReason }] }).finishReason, neutral);
  });
}
test('a Chat Completions refusal reads as a refusal, its text kept', (t) => {
  const read = readChatAnswer({ choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: 'I cannot help.' }, finish_reason: 'stop' }] });
  t.is(read.finishReason, 'refusal');
  t.deepEqual(read.content, [{ type: 'text', text: 'I cannot help.' }]);
});

const toChat: Array<[FinishReason, string]> = [
  ['stop', 'stop'],
  ['length', 'length'],
  ['tool-calls', 'tool_calls'],
  ['stop-sequence', 'stop'],
  ['content-filter', 'content_filter'],
  ['refusal', 'content_filter'],
  ['pause', 'stop'],
  ['other', 'stop'],
];
test('the neutral → Chat Completions table has exactly the rows tested', (t) => t.deepEqual(Object.entries(TO_CHAT_FINISH), toChat));
for (const [neutral, finishReason] of toChat) {
  test(`${neutral} is written as Chat Completions finish_reason ${finishReason}`, (t) => {
    t.like(writeChatAnswer(neutralAnswer(neutral)), { choices: [{ finish_reason: finishReason }] });
  });
}

const toResponses: Array<[FinishReason, string, unknown]> = [
  ['stop', 'completed', null],
  ['length', 'incomplete', { reason: 'max_output_tokens' }],
  ['tool-calls', 'completed', null],
  ['stop-sequence', 'completed', null],
  ['content-filter', 'incomplete', { reason: 'content_filter' }],
  ['refusal', 'incomplete', { reason: 'content_filter' }],
  ['pause', 'completed', null],
  ['other', 'completed', null],
];
const request = { model: 'm', stream: false, system: [], messages: [], tools: [] };
for (const [neutral, status, details] of toResponses) {
  test(`${neutral} is written as a Responses status ${status}`, (t) => {
    t.like(writeResponsesAnswer(neutralAnswer(neutral), request), { status, incomplete_details: details });
  });
}

// The endpoints an openai provider speaks, and so the translations it needs.
test('an openai provider speaks the endpoints it declares, both by default', (t) => {
  const both = openAIProvider({ id: 'openai' });
  t.is(typeof both.chatCompletions, 'function');
  t.is(typeof both.responses, 'function');
  const chatOnly = createProvider({ kind: 'openai', id: 'vllm', baseURL: 'http://vllm.internal:8000/v1', endpoints: ['chat.completions'] });
  t.is(typeof chatOnly.chatCompletions, 'function');
  t.is(chatOnly.responses, undefined);
  const responsesOnly = openAIProvider({ id: 'r', endpoints: ['responses'] });
  t.is(responsesOnly.chatCompletions, undefined);
  t.is(typeof responsesOnly.responses, 'function');
});

test('bad endpoints are refused when the provider is made, naming the option', (t) => {
  for (const endpoints of [[], ['responses', 'responses'], 'responses']) {
    t.throws(() => openAIProvider({ id: 'x', endpoints } as never), {
      message: /openAIProvider\(\): endpoints must be a non-empty list of distinct endpoints among 'chat\.completions', 'responses'/,
    });
  }
  t.throws(() => openAIProvider({ id: 'x', endpoints: ['messages'] } as never), {
    message: /openAIProvider\(\): endpoints\[0\] must be one of 'chat\.completions', 'responses'/,
  });
});

// Every answer the gateway writes itself, checked against OpenAI's published schemas
// (test/fixtures/openai-openapi/): the echo provider's, the translated ones of the conformance
// table, and the Shape A error bodies.

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

const tool = {
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

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
      const body = {
        model: 'echo-1',
        messages: [{ role: 'user', content: 'Hello there' }],
        stream,
        ...(stream && { stream_options: { include_usage: true } }),
        ...chat,
      };
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

for (const [file, fixture] of fixtures) {
  const schemas = SCHEMAS[fixture.client];
  if (schemas === undefined) continue;
  test(`translated answer of ${file} is OpenAI's`, async (t) => {
    const text = fixture.events === undefined ? JSON.stringify(fixture.answer) : await readFile(new URL(fixture.events, DIR), 'utf8');
    t.deepEqual(problemsOf(text, fixture.events !== undefined, ...schemas), []);
  });
}

test("every error the gateway defines, in Shape A, is OpenAI's ErrorResponse", (t) => {
  const made = Object.values(errors).map((make) => (make as (...args: unknown[]) => GatewayError)('x', 'y', 'z'));
  t.deepEqual(
    made.flatMap((err) => openAIProblems('ErrorResponse', shapeABody(err))),
    [],
  );
});

test("error bodies of the model endpoints are OpenAI's ErrorResponse", async (t) => {
  const answers = await Promise.all([
    gateway.post('/v1/chat/completions', { model: 'nope', messages: [{ role: 'user', content: 'hi' }] }, auth),
    gateway.post('/v1/chat/completions', { model: 'claude-test', messages: [{ role: 'user', content: 'hi' }], logprobs: true }, auth),
    gateway.post('/v1/responses', { model: 'claude-test', input: 'hi', text: { format: { type: 'json_object' } } }, auth),
    gateway.post('/v1/responses', { model: 'echo-1', input: 'hi' }),
  ]);
  t.deepEqual(
    answers.map((answer) => answer.status),
    [404, 400, 400, 401],
  );
  const bodies = await Promise.all(answers.map((answer) => answer.json()));
  t.deepEqual(
    bodies.flatMap((body) => openAIProblems('ErrorResponse', body)),
    [],
  );
});

test("a stream that fails after it started ends with an error event of the client's schema", async (t) => {
  const chat = await gateway.post('/v1/chat/completions', { model: 'claude-test', messages: [{ role: 'user', content: 'hi' }], stream: true }, auth);
  const chatEvents = eventData(await chat.text());
  t.true(
    chatEvents.some((event) => typeof event === 'object' && event !== null && 'error' in event),
    'the Chat Completions stream ends with an error',
  );
  t.deepEqual(
    chatEvents.flatMap((event) => openAIProblems('error' in (event as object) ? 'ErrorResponse' : 'CreateChatCompletionStreamResponse', event)),
    [],
  );
  const responses = await gateway.post('/v1/responses', { model: 'claude-test', input: 'hi', stream: true }, auth);
  const responsesEvents = eventData(await responses.text());
  t.like(responsesEvents.at(-1), { type: 'error' });
  t.deepEqual(
    responsesEvents.flatMap((event) => openAIProblems('ResponseStreamEvent', event)),
    [],
  );
});
