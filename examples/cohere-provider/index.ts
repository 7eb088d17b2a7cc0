/**
 * A provider for a third API, written outside the package as your own would be: a Cohere-style
 * chat API (`POST {baseURL}/v2/chat`, its own request, answer, event and error shapes) served to
 * clients as OpenAI's Chat Completions. `cohereProvider()` is a `Provider`; `providerKinds` holds
 * it as a registry entry, for a configuration that names it by `kind: "cohere"`.
 * examples/cohere-provider/cohere-provider.test.ts runs it through `providerContract()`.
 */
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { z } from 'zod';
import type { Provider, ProviderAnswer, ProviderRegistry, ProviderRequest } from 'koa-model-gateway/models';
import { httpBaseUrl, nonEmptyString, settingsMessage, settingsObject } from 'koa-model-gateway/settings';

export const cohereProviderOptions = settingsObject({
  id: nonEmptyString,
  baseURL: httpBaseUrl.optional(),
  apiKey: nonEmptyString.optional(),
});

export type CohereProviderOptions = z.input<typeof cohereProviderOptions>;

const DEFAULT_BASE_URL = 'https://api.cohere.com';
// The Chat Completions parameters this API can carry. Any other is refused by name, never dropped.
const CARRIED = new Set(['model', 'messages', 'stream', 'stream_options', 'max_tokens', 'temperature']);
const FINISH_REASONS: Record<string, string> = { COMPLETE: 'stop', STOP_SEQUENCE: 'stop', MAX_TOKENS: 'length' };

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

function jsonAnswer(statusCode: number, body: unknown, headers: Record<string, string> = {}): ProviderAnswer {
  return { statusCode, headers: { 'content-type': 'application/json', ...headers }, body: Readable.from([JSON.stringify(body)]) };
}

/** A 400 in Chat Completions' shape: the gateway passes its status and message to the client. */
const refuse = (message: string, param: string | null) => jsonAnswer(400, { error: { message, type: 'invalid_request_error', param, code: null } });

/** A message's text: a string, or the text parts of an array; undefined when it holds anything else. */
function textOf(content: unknown): string | undefined {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return undefined;
  let text = '';
  for (const part of content) {
    if (!isObject(part) || part.type !== 'text' || typeof part.text !== 'string') return undefined;
    text += part.text;
  }
  return text;
}

/** The upstream's request for a Chat Completions body, or the refusal of what it cannot carry. */
function chatRequest(body: Json): { request: Json } | { refusal: ProviderAnswer } {
  const unsupported = Object.keys(body).find((name) => !CARRIED.has(name));
  if (unsupported !== undefined) return { refusal: refuse(`This provider does not support '${unsupported}'`, unsupported) };
  if (!Array.isArray(body.messages)) return { refusal: refuse("'messages' must be an array", 'messages') };
  const messages: Json[] = [];
  for (const [index, message] of body.messages.entries()) {
    const content = isObject(message) ? textOf(message.content) : undefined;
    if (!isObject(message) || content === undefined) return { refusal: refuse('This provider takes text messages only', `messages[${index}].content`) };
    messages.push({ role: message.role, content });
  }
  // stream_options is the gateway's (include_usage): this API always reports usage.
  const carried = Object.fromEntries(Object.entries(body).filter(([name]) => name !== 'stream_options'));
  return { request: { ...carried, messages } };
}

const chatUsage = (usage: unknown) => {
  const tokens = isObject(usage) && isObject(usage.tokens) ? usage.tokens : {};
  const input = typeof tokens.input_tokens === 'number' ? tokens.input_tokens : 0;
  const output = typeof tokens.output_tokens === 'number' ? tokens.output_tokens : 0;
  return { prompt_tokens: input, completion_tokens: output, total_tokens: input + output };
};

function chatCompletion(answer: Json, model: unknown): Json {
  const content = isObject(answer.message) && Array.isArray(answer.message.content) ? answer.message.content : [];
  const text = content.map((part: unknown) => (isObject(part) && typeof part.text === 'string' ? part.text : '')).join('');
  return {
    id: `chatcmpl-${String(answer.id)}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: FINISH_REASONS[String(answer.finish_reason)] ?? 'stop' }],
    usage: chatUsage(answer.usage),
  };
}

/** The upstream's events, each parsed from its `data:` line. */
async function* upstreamEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<Json> {
  const decoder = new TextDecoder();
  let pending = '';
  for await (const bytes of body) {
    pending += decoder.decode(bytes, { stream: true });
    const events = pending.split('\n\n');
    pending = events.pop() ?? '';
    for (const event of events) {
      const data = event.split('\n').find((line) => line.startsWith('data:'));
      if (data !== undefined) yield JSON.parse(data.slice('data:'.length)) as Json;
    }
  }
}

/** The upstream's stream as Chat Completions chunks, each written as soon as its event arrives. */
async function* chatChunks(body: AsyncIterable<Uint8Array>, model: unknown, includeUsage: boolean): AsyncGenerator<string> {
  let id = 'chatcmpl-cohere';
  const created = Math.floor(Date.now() / 1000);
  const chunk = (choices: unknown[], extra: Json = {}) =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices, ...extra })}\n\n`;
  for await (const event of upstreamEvents(body)) {
    const delta = isObject(event.delta) ? event.delta : {};
    if (event.type === 'message-start') {
      id = `chatcmpl-${String(event.id)}`;
      yield chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]);
    } else if (event.type === 'content-delta') {
      const message = isObject(delta.message) && isObject(delta.message.content) ? delta.message.content : {};
      yield chunk([{ index: 0, delta: { content: typeof message.text === 'string' ? message.text : '' }, finish_reason: null }]);
    } else if (event.type === 'message-end') {
      yield chunk([{ index: 0, delta: {}, finish_reason: FINISH_REASONS[String(delta.finish_reason)] ?? 'stop' }]);
      if (includeUsage) yield chunk([], { usage: chatUsage(delta.usage) });
      yield 'data: [DONE]\n\n';
    }
  }
}

/** A refusal of the upstream's (`{ "message" }`) in Chat Completions' shape, with its status and `retry-after`. */
async function upstreamRefusal(response: Response): Promise<ProviderAnswer> {
  let message: unknown;
  try {
    const body: unknown = await response.json();
    if (isObject(body)) message = body.message;
  } catch {
    // No JSON: the gateway says something of its own.
  }
  const retryAfter = response.headers.get('retry-after');
  return jsonAnswer(response.status, { error: { message, type: 'invalid_request_error' } }, retryAfter === null ? {} : { 'retry-after': retryAfter });
}

/**
 * A Cohere-style chat API as Chat Completions: text messages, `max_tokens` and `temperature`
 * carried over, anything else refused with a 400 naming it; answers, streams (each event passed on
 * as it arrives) and refusals translated. Redirects are not followed (`redirect: 'manual'`: a 3xx
 * reaches the gateway, which answers 502) and the request's `signal` aborts the call, stream included.
 * @example const cohere = cohereProvider({ id: 'cohere', apiKey: process.env.COHERE_API_KEY })
 */
export function cohereProvider(options: CohereProviderOptions): Provider {
  const parsed = cohereProviderOptions.safeParse(options);
  if (!parsed.success) throw new TypeError(`cohereProvider(): ${settingsMessage(parsed.error, 'the options')}`);
  const { id, baseURL = DEFAULT_BASE_URL, apiKey } = parsed.data;
  const url = `${baseURL.replace(/\/+$/, '')}/v2/chat`;
  const credentials: Record<string, string> = apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` };
  return {
    id,
    async chatCompletions({ body, signal }: ProviderRequest) {
      const translated = chatRequest(body);
      if ('refusal' in translated) return translated.refusal;
      const stream = body.stream === true;
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: stream ? 'text/event-stream' : 'application/json', ...credentials },
        body: JSON.stringify(translated.request),
        redirect: 'manual',
        signal,
      });
      if (!response.ok) return upstreamRefusal(response);
      if (!stream) return jsonAnswer(200, chatCompletion((await response.json()) as Json, body.model));
      const includeUsage = isObject(body.stream_options) && body.stream_options.include_usage === true;
      const events = response.body === null ? Readable.from([]) : Readable.fromWeb(response.body as WebReadableStream<Uint8Array>);
      return { statusCode: 200, headers: { 'content-type': 'text/event-stream' }, body: Readable.from(chatChunks(events, body.model, includeUsage)) };
    },
  };
}

/**
 * The provider kinds of this module, as a registry: what the reference server imports when its
 * config file lists the module in `providerModules`, and what `createProvider()` takes as
 * `{ ...providerRegistry, ...providerKinds }`.
 */
export const providerKinds = { cohere: { options: cohereProviderOptions, create: cohereProvider } } satisfies ProviderRegistry;
