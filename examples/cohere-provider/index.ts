/**
 * A provider for a third API, written outside the package as your own would be: a Cohere-style
 * chat API (`POST {baseURL}/v2/chat`, its own request, answer, event and error shapes) on the
 * neutral interface, so that every client format reaches it: Chat Completions, Responses and
 * Messages, tools included. `cohereProvider()` is a `Provider`; `providerKinds` holds it as a
 * registry entry, for a configuration that names it by `kind: "cohere"`.
 * examples/cohere-provider/cohere-provider.test.ts runs it through `providerContract()`.
 */
import type { z } from 'zod';
import {
  UpstreamStatusError,
  untranslatable,
  type Answer,
  type FinishReason,
  type Part,
  type Provider,
  type ProviderRegistry,
  type ReadRequest,
  type StreamPart,
  type Usage,
} from 'koa-model-gateway/models';
import { httpBaseUrl, nonEmptyString, settingsMessage, settingsObject } from 'koa-model-gateway/settings';

export const cohereProviderOptions = settingsObject({
  id: nonEmptyString,
  baseURL: httpBaseUrl.optional(),
  apiKey: nonEmptyString.optional(),
});

export type CohereProviderOptions = z.input<typeof cohereProviderOptions>;

const NAME = 'Cohere';
const DEFAULT_BASE_URL = 'https://api.cohere.com';
const FINISH_REASONS: Record<string, FinishReason> = { COMPLETE: 'stop', STOP_SEQUENCE: 'stop-sequence', MAX_TOKENS: 'length', TOOL_CALL: 'tool-calls' };

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The text of parts that must be text only; `param` names them in a refusal. */
function textOnly(parts: readonly Part[], param: string): string {
  return parts
    .map((part) => {
      if (part.type !== 'text') throw untranslatable(`${param}: a ${part.type} part`, NAME);
      return part.text;
    })
    .join('');
}

/** The neutral request as this API's, or a 400 naming the client's field it cannot carry. */
function chatRequest(request: ReadRequest): Json {
  const { params } = request;
  const refuse = (field: keyof typeof params, fallback: string) => untranslatable(params[field] ?? fallback, NAME);
  if (request.reasoning !== undefined) throw refuse('reasoning', 'reasoning');
  if (request.verbosity !== undefined) throw refuse('verbosity', 'verbosity');
  if (request.serviceTier !== undefined) throw refuse('serviceTier', 'service_tier');
  if (request.parallelToolCalls === false) throw refuse('parallelToolCalls', 'parallel_tool_calls');
  if (request.toolChoice?.type === 'tool') throw refuse('toolChoice', 'tool_choice');
  const at = params.messages ?? 'messages';
  const messages: Json[] = request.system.map((content) => ({ role: 'system', content }));
  for (const message of request.messages) {
    if (message.role === 'assistant') {
      const calls = message.parts.filter((part) => part.type === 'tool-call');
      const text = textOnly(
        message.parts.filter((part) => part.type !== 'tool-call'),
        at,
      );
      messages.push({
        role: 'assistant',
        ...(text !== '' && { content: text }),
        ...(calls.length > 0 && { tool_calls: calls.map(({ id, name, input }) => ({ id, type: 'function', function: { name, arguments: input } })) }),
      });
      continue;
    }
    const results = message.parts.filter((part) => part.type === 'tool-result');
    for (const result of results) messages.push({ role: 'tool', tool_call_id: result.callId, content: textOnly(result.content, at) });
    const rest = message.parts.filter((part) => part.type !== 'tool-result');
    if (rest.length > 0) messages.push({ role: 'user', content: textOnly(rest, at) });
  }
  const body: Json = { model: request.model, messages, stream: request.stream };
  if (request.tools.length > 0) {
    body.tools = request.tools.map(({ name, description, parameters }) => ({ type: 'function', function: { name, description, parameters } }));
  }
  if (request.toolChoice?.type === 'required') body.tool_choice = 'REQUIRED';
  if (request.toolChoice?.type === 'none') body.tool_choice = 'NONE';
  if (request.maxTokens !== undefined) body.max_tokens = request.maxTokens;
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.topP !== undefined) body.p = request.topP;
  if (request.stop !== undefined) body.stop_sequences = request.stop;
  const format = request.responseFormat;
  if (format !== undefined) body.response_format = { type: 'json_object', ...(format.type === 'json-schema' && { json_schema: format.schema }) };
  return body;
}

/** The client's hints this API has no place for, by the client's names: left out, and named in `x-kmg-omitted`. */
function omittedHints(request: ReadRequest): string[] {
  return [...(request.user === undefined ? [] : [request.params.user ?? 'user']), ...Object.keys(request.openAI ?? {})];
}

function usageOf(usage: unknown): Usage {
  const tokens = isObject(usage) && isObject(usage.tokens) ? usage.tokens : {};
  return {
    inputTokens: typeof tokens.input_tokens === 'number' ? tokens.input_tokens : 0,
    outputTokens: typeof tokens.output_tokens === 'number' ? tokens.output_tokens : 0,
  };
}

const finishOf = (reason: unknown): FinishReason => FINISH_REASONS[String(reason)] ?? 'other';

function answerOf(answer: Json): Answer {
  const message = isObject(answer.message) ? answer.message : {};
  const content: Part[] = [];
  for (const part of Array.isArray(message.content) ? message.content : []) {
    if (isObject(part) && typeof part.text === 'string') content.push({ type: 'text', text: part.text });
  }
  for (const call of Array.isArray(message.tool_calls) ? message.tool_calls : []) {
    const fn = isObject(call) && isObject(call.function) ? call.function : {};
    content.push({ type: 'tool-call', id: String((call as Json).id), name: String(fn.name), input: typeof fn.arguments === 'string' ? fn.arguments : '{}' });
  }
  return {
    id: String(answer.id),
    model: '',
    content,
    finishReason: finishOf(answer.finish_reason),
    usage: usageOf(answer.usage),
    created: Math.floor(Date.now() / 1000),
  };
}

/** The upstream's events, each parsed from its `data:` line; stopping the iteration cancels the body, which ends the call. */
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

/** One upstream event as neutral stream parts; `calls` holds the ids of the tool calls by their index. */
function partsOf(event: Json, calls: Map<number, string>): StreamPart[] {
  const delta = isObject(event.delta) ? event.delta : {};
  const message = isObject(delta.message) ? delta.message : {};
  const index = typeof event.index === 'number' ? event.index : 0;
  switch (event.type) {
    case 'message-start':
      return [{ type: 'start', id: String(event.id), model: '', created: Math.floor(Date.now() / 1000) }];
    case 'content-start':
      return [{ type: 'text-start' }];
    case 'content-delta': {
      const content = isObject(message.content) ? message.content : {};
      return [{ type: 'text-delta', delta: typeof content.text === 'string' ? content.text : '' }];
    }
    case 'content-end':
      return [{ type: 'text-end' }];
    case 'tool-call-start': {
      const call = isObject(message.tool_calls) ? message.tool_calls : {};
      const fn = isObject(call.function) ? call.function : {};
      const id = String(call.id);
      calls.set(index, id);
      const args = typeof fn.arguments === 'string' ? fn.arguments : '';
      return [{ type: 'tool-call-start', id, name: String(fn.name) }, ...(args === '' ? [] : [{ type: 'tool-call-delta' as const, id, delta: args }])];
    }
    case 'tool-call-delta': {
      const call = isObject(message.tool_calls) ? message.tool_calls : {};
      const fn = isObject(call.function) ? call.function : {};
      return [{ type: 'tool-call-delta', id: calls.get(index) ?? '', delta: typeof fn.arguments === 'string' ? fn.arguments : '' }];
    }
    case 'tool-call-end':
      return [{ type: 'tool-call-end', id: calls.get(index) ?? '' }];
    case 'message-end':
      return [{ type: 'finish', finishReason: finishOf(delta.finish_reason), usage: usageOf(delta.usage) }];
    default:
      // The tool plan and citations: nothing a client format carries.
      return [];
  }
}

/** The upstream's error (`{ "message" }`) with its status and `retry-after`: the gateway answers it as any upstream's. */
async function upstreamError(response: Response): Promise<UpstreamStatusError> {
  let message = `${NAME} answered HTTP ${response.status}`;
  try {
    const body: unknown = await response.json();
    if (isObject(body) && typeof body.message === 'string') message = body.message;
  } catch {
    // No JSON: the status alone tells.
  }
  return new UpstreamStatusError(response.status, message, { retryAfter: response.headers.get('retry-after') ?? undefined });
}

/**
 * A Cohere-style chat API on the neutral interface: text messages, tools and their results, the
 * output limit, temperature, top-p, stop sequences and JSON answers carried over; reasoning, a
 * tool named by `tool_choice`, `parallel_tool_calls: false`, and parts other than text refused with
 * a 400 naming the client's field. Redirects are not followed (`redirect: 'manual'`: a 3xx is an
 * upstream error, which the gateway answers 502) and the call's `signal` aborts it, stream included.
 * @example const cohere = cohereProvider({ id: 'cohere', apiKey: process.env.COHERE_API_KEY })
 */
export function cohereProvider(options: CohereProviderOptions): Provider {
  const parsed = cohereProviderOptions.safeParse(options);
  if (!parsed.success) throw new TypeError(`cohereProvider(): ${settingsMessage(parsed.error, 'the options')}`);
  const { id, baseURL = DEFAULT_BASE_URL, apiKey } = parsed.data;
  const url = `${baseURL.replace(/\/+$/, '')}/v2/chat`;
  const credentials: Record<string, string> = apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` };
  const post = async (request: ReadRequest, signal: AbortSignal) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: request.stream ? 'text/event-stream' : 'application/json', ...credentials },
      body: JSON.stringify(chatRequest(request)),
      redirect: 'manual',
      signal,
    });
    if (!response.ok) throw await upstreamError(response);
    return response;
  };
  return {
    id,
    telemetry: { providerName: 'cohere' },
    neutral: {
      name: NAME,
      check(request) {
        chatRequest(request);
        return omittedHints(request);
      },
      async generate({ request, signal }) {
        return answerOf((await (await post(request, signal)).json()) as Json);
      },
      async *stream({ request, signal }) {
        const response = await post(request, signal);
        const calls = new Map<number, string>();
        if (response.body === null) return;
        for await (const event of upstreamEvents(response.body as AsyncIterable<Uint8Array>)) yield* partsOf(event, calls);
      },
    },
  };
}

/**
 * The provider kinds of this module, as a registry: what the reference server imports when its
 * config file lists the module in `providerModules`, and what `createProvider()` takes as
 * `{ ...providerRegistry, ...providerKinds }`.
 */
export const providerKinds = { cohere: { options: cohereProviderOptions, create: cohereProvider } } satisfies ProviderRegistry;
