import { pipeline, Readable, Transform } from 'node:stream';
import type { TokenUsage } from '../../usage/token-usage.js';
import { eventObject, unreadableStreamEvent } from '../answer.js';
import { isObject, type JsonObject } from '../content.js';
import type { Provider, ProviderAnswer, ProviderEndpoint, ProviderRequest } from '../provider.js';
import { countPdfPages } from '../providers/echo/received.js';
import { EventSplitter, eventFields } from '../../http/server-sent-events.js';
import {
  answerHeader,
  DEFAULT_MAX_UPSTREAM_BYTES,
  discard,
  providerAnswer,
  readWhole,
  UPSTREAM_CALL,
  type CallRequest,
  type UpstreamCall,
} from '../upstream-call.js';
import { ClientStream } from './client-stream.js';
import { neutralTranslation } from './neutral-call.js';
import type { Part, Request } from './neutral.js';
import { TRANSLATIONS as FORMATS, translationTargets, type FormatEndpoint } from './registry.js';
import { checkToolChoice, type ReadRequest, type WireFormat } from './wire-format.js';

export type { FormatEndpoint };

/** What a translated call is sent as: a provider's format, or the neutral representation. */
export type TranslationTarget = ProviderEndpoint | 'neutral';

/** A call in a format its provider does not speak, carried in one it does, or in the neutral representation. */
export interface Translation {
  /** The provider's format; `neutral` for a provider of the neutral representation (`Provider.neutral`). */
  readonly target: TranslationTarget;
  /**
   * Refuses (400, by name) what cannot be carried over, before anything is sent or counted: in
   * the body, or in the client's headers meant for the upstream (`anthropic-beta`). Answers what
   * it would leave out, by name (`x-kmg-omitted`).
   */
  check(body: JsonObject, headers: Readonly<Record<string, string>>): string[];
  /** Sends the translated request, and answers as the client's format would: JSON or events. */
  send(request: ProviderRequest): Promise<TranslatedAnswer>;
}

/**
 * A translated answer, and the usage its stream has told so far (the input as soon as the
 * provider's format tells it), which a client leaving before the end would not have seen in its own.
 */
export interface TranslatedAnswer extends ProviderAnswer {
  readonly usage: TokenUsage;
  /** The client's fields and betas left out, by name: what the answer's `x-kmg-omitted` says. */
  readonly omitted: readonly string[];
}

/** The header of a translated answer naming what was left out of the client's request (decisions.md). */
export const OMITTED_HEADER = 'x-kmg-omitted';

const EVENT_STREAM = /^text\/event-stream\b/i;
const JSON_HEADERS = { 'content-type': 'application/json' };
const EVENT_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8' };

/**
 * How a call in `client`'s format reaches `provider`, which does not speak it: the neutral
 * representation when the provider speaks it (one translation, not two), else the first format of
 * TARGETS the provider speaks, or, for a token count, an estimate. Undefined when there is none.
 */
export function translation(client: ProviderEndpoint, provider: Provider): Translation | undefined {
  if (client === 'countTokens') return estimate(provider);
  // Embeddings have no other format: a provider has them (embeddingsSender()) or not.
  if (client === 'embeddings') return undefined;
  const from = FORMATS[client];
  if (provider.neutral !== undefined) return neutralTranslation(from, provider.neutral);
  for (const target of translationTargets(client)) {
    const method = provider[target];
    const to = FORMATS[target].provider;
    if (method === undefined || to === undefined) continue;
    const read = (body: JsonObject) => {
      const request = from.client.readRequest(body, FORMATS[target].name);
      checkToolChoice(request);
      return request;
    };
    // The request as the provider's format, and what was left out of it: of the body, then of the headers.
    const write = (body: JsonObject, headers: Readonly<Record<string, string>>) => {
      const betas = from.client.checkHeaders?.(headers, FORMATS[target].name) ?? [];
      const neutral = read(body);
      const written = to.writeRequest(neutral);
      return { neutral, written, omitted: [...neutral.omitted, ...betas] };
    };
    return {
      target,
      check: (body, headers) => write(body, headers).omitted,
      async send(request) {
        const { neutral, written, omitted } = write(request.body, request.headers);
        const call = (request as Partial<CallRequest>)[UPSTREAM_CALL];
        const maxBytes = call?.maxBytes ?? DEFAULT_MAX_UPSTREAM_BYTES;
        const answer = providerAnswer(await method.call(provider, withBody(request, written)));
        const usage: TokenUsage = { inputTokens: 0, outputTokens: 0 };
        // A refusal or a failure is answered as a native call's is (decisions.md: 5xx is 502).
        if (answer.statusCode < 200 || answer.statusCode > 299) return { ...answer, usage, omitted };
        if (!neutral.stream)
          return { statusCode: 200, headers: JSON_HEADERS, body: translatedJson(answer.body, from, to, neutral, usage, { maxBytes, call }), usage, omitted };
        if (!EVENT_STREAM.test(answerHeader(answer, 'content-type'))) return { ...answer, usage, omitted };
        return { statusCode: 200, headers: EVENT_HEADERS, body: through(answer.body, streamTranslator(from, to, neutral, usage, maxBytes)), usage, omitted };
      },
    };
  }
  return undefined;
}

/** `body` through `transform`: destroying either ends both, a failure of either fails the result. */
function through(body: Readable, transform: Transform): Readable {
  return pipeline(body, transform, () => undefined);
}

/**
 * `request` with another body. One made by `UpstreamCall.request()` is made again by its call,
 * so that its signal stays unmade until a provider reads it: spreading it would make it.
 */
export function withBody(request: ProviderRequest, body: JsonObject): ProviderRequest {
  const call = (request as Partial<CallRequest>)[UPSTREAM_CALL];
  return call ? call.request(body, request.headers) : { ...request, body };
}

/**
 * A JSON answer in the client's format: `body` read whole (at most `maxBytes`, each chunk a sign
 * of life for `call`: the result's one chunk comes only at the end), translated once, and given
 * as one chunk. What is not a JSON object passes as it is, to be refused as malformed. Destroying
 * the result destroys `body`; a failure of `body` fails the result. Not a Transform in a pipeline:
 * that makes an AbortController and, at its end, an AbortError with its stack, on every call.
 */
function translatedJson(
  body: Readable,
  from: WireFormat,
  to: NonNullable<WireFormat['provider']>,
  request: Request,
  usage: TokenUsage,
  { maxBytes, call }: { maxBytes: number; call: UpstreamCall | undefined },
): Readable {
  const result = new Readable({
    read() {},
    destroy(err, callback) {
      if (!body.readableEnded) discard(body);
      callback(err);
    },
  });
  const translate = (whole: string): string => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(whole);
    } catch {
      return whole;
    }
    if (!isObject(parsed)) return whole;
    const answer = to.readAnswer(parsed);
    Object.assign(usage, answer.usage);
    return JSON.stringify(from.client.writeAnswer(answer, request));
  };
  // readWhole() fails as the body does, and when it is destroyed before its end.
  readWhole(body, maxBytes, call).then(
    (whole) => {
      try {
        result.push(translate(whole));
        result.push(null);
      } catch (err) {
        result.destroy(err as Error);
      }
    },
    (err: Error) => result.destroy(err),
  );
  return result;
}

/**
 * An event stream, event by event, in the client's format: the provider's reader and the client's
 * writer, one per stream; `usage` is kept up to date with what the provider's events tell. An
 * event it cannot read (not JSON, not the format's shape, content before the start) fails the
 * stream, as a stream cut before its finish does: the client never gets an answer that looks whole.
 */
function streamTranslator(from: WireFormat, to: NonNullable<WireFormat['provider']>, request: Request, usage: TokenUsage, maxEventBytes: number): Transform {
  const splitter = new EventSplitter({ maxEventBytes });
  const reader = to.streamReader();
  const client = new ClientStream(from.client.streamWriter(request), usage);
  const translate = (events: string[]) => {
    let out = '';
    for (const event of events) {
      const { name, data } = eventFields(event);
      // A comment or a keep-alive has no data; `[DONE]` ends an OpenAI stream, whose reader finishes without it.
      if (data === undefined || data === '[DONE]') continue;
      const parsed = eventObject(data);
      if (parsed === undefined) throw unreadableStreamEvent('an event whose data is not a JSON object');
      out += client.write(reader.read(name, parsed));
    }
    return out;
  };
  return new Transform({
    transform(chunk: Buffer | string, _encoding, done) {
      try {
        const out = translate(splitter.push(chunk));
        done(null, out === '' ? undefined : out);
      } catch (err) {
        done(err as Error);
      }
    },
    flush(done) {
      try {
        const out = translate(splitter.end()) + client.write(reader.end());
        if (client.finished) {
          done(null, out + client.end());
          return;
        }
        // Cut short (no finish, no final event): what came is sent, then the stream fails.
        if (out !== '') this.push(out);
        client.end();
      } catch (err) {
        done(err as Error);
      }
    },
  });
}

// The estimate's rates: about four characters a token for text, as tokenizers of English average;
// an image at Anthropic's largest (1,600 tokens), a PDF page at about what a page of text and its image cost.
const CHARS_PER_TOKEN = 4;
const IMAGE_TOKENS = 1600;
const PDF_PAGE_TOKENS = 2000;

function partTokens(part: Part): number {
  switch (part.type) {
    case 'text':
    case 'reasoning':
      return Math.ceil(part.text.length / CHARS_PER_TOKEN);
    case 'tool-call':
      return Math.ceil((part.name.length + part.input.length) / CHARS_PER_TOKEN);
    case 'tool-result':
      return part.content.reduce((sum, inner) => sum + partTokens(inner), 0);
    case 'image':
      return IMAGE_TOKENS;
    case 'file':
      return Math.max(1, countPdfPages(Buffer.from(part.data, 'base64'))) * PDF_PAGE_TOKENS;
    case 'redacted-reasoning':
      return Math.ceil(part.data.length / CHARS_PER_TOKEN);
  }
}

/**
 * The input tokens of a Messages request, estimated without the provider: about four characters
 * a token of text (system prompt, messages, tool definitions), 1,600 per image, 2,000 per PDF
 * page. An estimate, not the model's tokenizer: it may be off by a fair margin either way.
 */
export function estimateInputTokens(request: Request): number {
  const text = request.system.join('\n').length + request.tools.reduce((sum, tool) => sum + JSON.stringify(tool).length, 0);
  return (
    Math.ceil(text / CHARS_PER_TOKEN) + request.messages.reduce((sum, message) => sum + message.parts.reduce((inner, part) => inner + partTokens(part), 0), 0)
  );
}

/**
 * The input tokens of a call in `endpoint`'s format, estimated as `estimateInputTokens()` does;
 * a body only its own format can hold (a parameter no other has) by its length, four characters
 * a token.
 */
export function estimateCallInputTokens(endpoint: ProviderEndpoint, body: JsonObject): number {
  const request = endpoint === 'countTokens' || endpoint === 'embeddings' ? undefined : readNeutral(endpoint, body);
  return request === undefined ? Math.ceil(JSON.stringify(body).length / CHARS_PER_TOKEN) : estimateInputTokens(request);
}

/**
 * A call in `endpoint`'s format in the neutral representation: read as if translated to the first
 * of its targets that can carry it (a reader knows the classes of its fields only towards another
 * format); undefined when none can (a field the neutral representation cannot hold, such as `n`).
 */
export function readNeutral(endpoint: FormatEndpoint, body: JsonObject): ReadRequest | undefined {
  for (const target of translationTargets(endpoint)) {
    try {
      return FORMATS[endpoint].client.readRequest(body, FORMATS[target].name);
    } catch {
      // The next target may carry it.
    }
  }
  return undefined;
}

/**
 * The output tokens of `chars` characters of an answer's text, tool arguments and reasoning,
 * estimated at four characters a token.
 */
export const estimateOutputTokens = (chars: number) => Math.ceil(chars / CHARS_PER_TOKEN);

/**
 * A token count for a provider that has no counting endpoint: the estimate, when it speaks the
 * neutral representation or a format a Messages request can be translated to.
 */
function estimate(provider: Provider): Translation | undefined {
  const { neutral } = provider;
  const target = neutral
    ? 'neutral'
    : translationTargets('messages').find((format) => provider[format] !== undefined && FORMATS[format].provider !== undefined);
  if (target === undefined) return undefined;
  const name = neutral?.name ?? FORMATS[target as FormatEndpoint].name;
  // What the provider would refuse is refused here too: a count of a call that cannot be made is no count.
  const refuse = (request: ReadRequest): string[] => {
    if (neutral) return neutral.check?.(request) ?? [];
    FORMATS[target as FormatEndpoint].provider?.writeRequest(request);
    return [];
  };
  const write = (body: JsonObject, headers: Readonly<Record<string, string>>) => {
    const betas = FORMATS.messages.client.checkHeaders?.(headers, name) ?? [];
    const request = FORMATS.messages.client.readRequest(body, name);
    return { request, omitted: [...new Set([...request.omitted, ...refuse(request), ...betas])] };
  };
  return {
    target,
    check: (body, headers) => write(body, headers).omitted,
    send: async ({ body, headers }) => {
      const { request, omitted } = write(body, headers);
      return {
        statusCode: 200,
        headers: JSON_HEADERS,
        body: Readable.from([JSON.stringify({ input_tokens: estimateInputTokens(request) })]),
        usage: { inputTokens: 0, outputTokens: 0 },
        omitted,
      };
    },
  };
}
