import { createHash } from 'node:crypto';
import { errors } from '../../../errors/gateway-error.js';
import { addAbortSignal, Readable } from 'node:stream';
import type { z } from 'zod';
import { nonEmptyString, parseOptions, settingsObject } from '../../../settings/schemas.js';
import { isObject, type JsonObject } from '../../content.js';
import type { EmbedAnswer, EmbedRequest, Provider, ProviderAnswer, ProviderRequest } from '../../provider.js';
import { answerLines, inputWords, receivedChat, receivedMessages, receivedResponses, responsesMessages, words } from './received.js';
import { argumentPieces, chatToolCall, messagesToolCall, responsesToolCall, type EchoToolCall } from './tools.js';
import { MESSAGE_UNKNOWNS, messageUsage } from '../../formats/messages/answer.js';

/** The echo provider needs nothing but its `id`. */
export const echoProviderOptions = settingsObject({ id: nonEmptyString });

export type EchoProviderOptions = z.input<typeof echoProviderOptions>;

const sse = (data: unknown, event?: string) => `${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`;

function json(statusCode: number, body: unknown): ProviderAnswer {
  return { statusCode, headers: { 'content-type': 'application/json' }, body: Readable.from([JSON.stringify(body)]) };
}

/** Server-sent events, one chunk per event, so the client sees them arrive one by one; ended by `signal`. */
function eventStream(events: string[], signal: AbortSignal): ProviderAnswer {
  return { statusCode: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8' }, body: addAbortSignal(signal, Readable.from(events)) };
}

// The same request gets the same id, so answers are reproducible.
const digest = (body: JsonObject) => createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 24);

// A call's output tokens, counted as echo counts every token: in words.
const callWords = (call: EchoToolCall) => words(`${call.name} ${call.arguments}`);

function chatCompletion({ body, signal }: ProviderRequest): ProviderAnswer {
  if (!Array.isArray(body.messages)) {
    return json(400, { error: { message: "'messages' must be an array", type: 'invalid_request_error', param: 'messages', code: null } });
  }
  const call = chatToolCall(body);
  const lines = call === undefined ? answerLines(receivedChat(body, body.messages)) : [];
  const text = lines.join('');
  const key = digest(body);
  const id = `chatcmpl-echo${key}`;
  const created = Math.floor(Date.now() / 1000);
  const model = body.model;
  const usage = { prompt_tokens: inputWords(body.messages), completion_tokens: call === undefined ? words(text) : callWords(call) };
  const fullUsage = { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };
  const callId = `call_echo${key}`;
  const finishReason = call === undefined ? 'stop' : 'tool_calls';
  if (body.stream !== true) {
    const toolCalls = call === undefined ? {} : { tool_calls: [{ id: callId, type: 'function', function: call }] };
    const answer = { role: 'assistant', content: call === undefined ? text : null, ...toolCalls, refusal: null };
    return json(200, {
      id,
      object: 'chat.completion',
      created,
      model,
      choices: [{ index: 0, message: answer, logprobs: null, finish_reason: finishReason }],
      usage: fullUsage,
    });
  }
  const chunk = (delta: JsonObject, finish: string | null) =>
    sse({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
  const includeUsage = isObject(body.stream_options) && body.stream_options.include_usage === true;
  // As OpenAI streams a call: its id and name first, then the arguments in pieces.
  const deltas =
    call === undefined
      ? [{ role: 'assistant', content: '' }, ...lines.map((line) => ({ content: line }))]
      : [
          { role: 'assistant', content: null, tool_calls: [{ index: 0, id: callId, type: 'function', function: { name: call.name, arguments: '' } }] },
          ...argumentPieces(call.arguments).map((piece) => ({ tool_calls: [{ index: 0, function: { arguments: piece } }] })),
        ];
  const events = [
    ...deltas.map((delta) => chunk(delta, null)),
    chunk({}, finishReason),
    ...(includeUsage ? [sse({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: fullUsage })] : []),
    'data: [DONE]\n\n',
  ];
  return eventStream(events, signal);
}

function message({ body, signal }: ProviderRequest): ProviderAnswer {
  if (!Array.isArray(body.messages)) {
    return json(400, { type: 'error', error: { type: 'invalid_request_error', message: 'messages: Field required' } });
  }
  const call = messagesToolCall(body);
  const lines = call === undefined ? answerLines(receivedMessages(body, body.messages)) : [];
  const text = lines.join('');
  const key = digest(body);
  const id = `msg_echo${key}`;
  const model = body.model;
  const inputTokens = inputWords(body.messages);
  const outputTokens = call === undefined ? words(text) : callWords(call);
  const stopReason = call === undefined ? 'end_turn' : 'tool_use';
  const toolUse = (input: unknown) => ({ type: 'tool_use', id: `toolu_echo${key}`, name: call?.name, input, caller: { type: 'direct' } });
  if (body.stream !== true) {
    return json(200, {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: [call === undefined ? { type: 'text', text } : toolUse(JSON.parse(call.arguments))],
      stop_reason: stopReason,
      stop_sequence: null,
      usage: messageUsage({ inputTokens, outputTokens }),
      ...MESSAGE_UNKNOWNS,
    });
  }
  const start = {
    id,
    type: 'message',
    role: 'assistant',
    model,
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: messageUsage({ inputTokens, outputTokens: 0 }),
    ...MESSAGE_UNKNOWNS,
  };
  // As Anthropic streams a tool_use block: empty `input` at its start, then `input_json_delta` pieces.
  const [block, deltas] =
    call === undefined
      ? [{ type: 'text', text: '' }, lines.map((line) => ({ type: 'text_delta', text: line }))]
      : [toolUse({}), argumentPieces(call.arguments).map((piece) => ({ type: 'input_json_delta', partial_json: piece }))];
  const events = [
    sse({ type: 'message_start', message: start }, 'message_start'),
    sse({ type: 'content_block_start', index: 0, content_block: block }, 'content_block_start'),
    ...deltas.map((delta) => sse({ type: 'content_block_delta', index: 0, delta }, 'content_block_delta')),
    sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
    sse({ type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: outputTokens } }, 'message_delta'),
    sse({ type: 'message_stop' }, 'message_stop'),
  ];
  return eventStream(events, signal);
}

/** A function tool as a response object gives it back: every field, `strict` by default (Responses' default). */
const toolObject = (tool: unknown) => (isObject(tool) && tool.type === 'function' ? { description: null, parameters: null, strict: true, ...tool } : tool);

/**
 * A Responses answer, as OpenAI's Responses API gives one: the response object, or its events
 * (`response.created`, `response.in_progress`, the message's item, part and text events or the
 * function call's item and argument events, then `response.completed` with the usage), each
 * numbered by `sequence_number`.
 */
function response({ body, signal }: ProviderRequest): ProviderAnswer {
  if (typeof body.input !== 'string' && !Array.isArray(body.input)) {
    return json(400, { error: { message: "'input' must be a string or an array", type: 'invalid_request_error', param: 'input', code: null } });
  }
  const call = responsesToolCall(body);
  const lines = call === undefined ? answerLines(receivedResponses(body)) : [];
  const text = lines.join('');
  const key = digest(body);
  const itemId = call === undefined ? `msg_echo${key}` : `fc_echo${key}`;
  const inputTokens = inputWords(responsesMessages(body.input)) + (typeof body.instructions === 'string' ? words(body.instructions) : 0);
  const outputTokens = call === undefined ? words(text) : callWords(call);
  const part = (partText: string) => ({ type: 'output_text', text: partText, annotations: [], logprobs: [] });
  const item = (status: string, content: unknown[]) => ({ id: itemId, type: 'message', status, role: 'assistant', content });
  const functionCall = (status: string, args: string) => ({
    id: itemId,
    type: 'function_call',
    status,
    call_id: `call_echo${key}`,
    name: call?.name,
    arguments: args,
  });
  const responseObject = (status: string, output: unknown[], usage: JsonObject | null) => ({
    id: `resp_echo${key}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: body.model,
    output,
    parallel_tool_calls: true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    store: false,
    temperature: body.temperature ?? 1,
    text: { format: { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: Array.isArray(body.tools) ? body.tools.map(toolObject) : [],
    top_p: body.top_p ?? 1,
    truncation: 'disabled',
    // None while in progress, as OpenAI's schema has it.
    ...(usage !== null && { usage }),
    metadata: {},
  });
  const usage = {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: inputTokens + outputTokens,
  };
  const done = call === undefined ? item('completed', [part(text)]) : functionCall('completed', call.arguments);
  if (body.stream !== true) return json(200, responseObject('completed', [done], usage));
  const started = responseObject('in_progress', [], null);
  const at = { item_id: itemId, output_index: 0, content_index: 0 };
  // A message streams its text part; a function call its arguments, as OpenAI streams them.
  const itemEvents: JsonObject[] =
    call === undefined
      ? [
          { type: 'response.output_item.added', output_index: 0, item: item('in_progress', []) },
          { type: 'response.content_part.added', ...at, part: part('') },
          ...lines.map((line) => ({ type: 'response.output_text.delta', ...at, delta: line, logprobs: [] })),
          { type: 'response.output_text.done', ...at, text, logprobs: [] },
          { type: 'response.content_part.done', ...at, part: part(text) },
        ]
      : [
          { type: 'response.output_item.added', output_index: 0, item: functionCall('in_progress', '') },
          ...argumentPieces(call.arguments).map((delta) => ({ type: 'response.function_call_arguments.delta', item_id: itemId, output_index: 0, delta })),
          { type: 'response.function_call_arguments.done', item_id: itemId, output_index: 0, name: call.name, arguments: call.arguments },
        ];
  const data: JsonObject[] = [
    { type: 'response.created', response: started },
    { type: 'response.in_progress', response: started },
    ...itemEvents,
    { type: 'response.output_item.done', output_index: 0, item: done },
    { type: 'response.completed', response: responseObject('completed', [done], usage) },
  ];
  return eventStream(
    data.map((event, index) => sse({ ...event, sequence_number: index }, String(event.type))),
    signal,
  );
}

/**
 * Anthropic's token count of a Messages body, estimated as echo counts every token: words, of the
 * messages and the system prompt. Like Anthropic's, it refuses `stream`: a count is never streamed.
 */
function tokenCount({ body }: ProviderRequest): ProviderAnswer {
  const invalid = (message: string) => json(400, { type: 'error', error: { type: 'invalid_request_error', message } });
  if (!Array.isArray(body.messages)) return invalid('messages: Field required');
  if ('stream' in body) return invalid('stream: Extra inputs are not permitted');
  const system = typeof body.system === 'string' ? words(body.system) : Array.isArray(body.system) ? inputWords([{ content: body.system }]) : 0;
  return json(200, { input_tokens: inputWords(body.messages) + system });
}

/** The length of echo's vectors when the client asks for none, and the most it makes. */
const DEFAULT_DIMENSIONS = 256;
const MAX_DIMENSIONS = 4096;

/**
 * A unit vector of `dimensions` made from the input's SHA-256: the same input always gets the same
 * vector, and different inputs point elsewhere.
 */
function echoVector(input: string | readonly number[], dimensions: number): Float32Array {
  const seed = createHash('sha256').update(JSON.stringify(input)).digest();
  const vector = new Float32Array(dimensions);
  let block = seed;
  for (let at = 0; at < dimensions; at++) {
    // Eight values a hash: the next block hashes the seed with its number.
    if (at % 8 === 0 && at > 0) block = createHash('sha256').update(seed).update(String(at)).digest();
    vector[at] = block.readInt32LE((at % 8) * 4) / 2 ** 31;
  }
  let squares = 0;
  for (const value of vector) squares += value * value;
  const norm = Math.sqrt(squares) || 1;
  for (let at = 0; at < dimensions; at++) vector[at] = (vector[at] as number) / norm;
  return vector;
}

function embed({ inputs, dimensions }: EmbedRequest): EmbedAnswer {
  if (dimensions !== undefined && dimensions > MAX_DIMENSIONS) throw errors.invalidRequest(`'dimensions' must be at most ${MAX_DIMENSIONS} for an echo model`);
  return {
    vectors: inputs.map((input) => echoVector(input, dimensions ?? DEFAULT_DIMENSIONS)),
    inputTokens: inputs.reduce((sum, input) => sum + (typeof input === 'string' ? words(input) : input.length), 0),
  };
}

/**
 * An offline provider for every endpoint format: it answers, deterministically and in the
 * endpoint's own format (streaming too), with what it received: the message count, the last user
 * message, the tool result the request ends with and each attached document's name, size and page
 * count. Offered tools (and `tool_choice` not "none"), it calls the first, or the one `tool_choice`
 * names, with arguments made from its schema, so that a tool loop can be tried offline. Its
 * embeddings are unit vectors made from each input's hash (256 dimensions unless asked).
 * Token counts are word counts (an array of token ids counts its length).
 * @example echoProvider({ id: 'echo' })
 */
export function echoProvider(options: EchoProviderOptions): Provider {
  const { id } = parseOptions(echoProviderOptions, options, 'echoProvider()');
  return {
    id,
    chatCompletions: async (request) => chatCompletion(request),
    responses: async (request) => response(request),
    messages: async (request) => message(request),
    countTokens: async (request) => tokenCount(request),
    embed: async (request) => embed(request),
  };
}
