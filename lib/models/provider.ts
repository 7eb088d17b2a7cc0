import type { Readable } from 'node:stream';
import type { Answer, StreamPart } from './formats/neutral.js';
import type { ReadRequest } from './formats/wire-format.js';

/** What the handlers hand a provider. */
export interface ProviderRequest {
  /**
   * The body in the endpoint's own format, `model` already the upstream's name, attached files
   * inlined and, on a streamed Chat Completions call, `stream_options.include_usage: true`.
   */
  body: Record<string, unknown>;
  /** Client headers meant for the upstream (`anthropic-version`, `anthropic-beta`), lower-case, when sent. */
  headers: Readonly<Record<string, string>>;
  /** Aborted when the upstream is too slow or the client goes away. */
  signal: AbortSignal;
  /**
   * The W3C trace context of the call (`traceparent`, `tracestate`) when it is traced
   * (`traceRequests()`): headers to send with the upstream request, as the built-in providers do.
   */
  traceHeaders?: Readonly<Record<string, string>> | undefined;
}

/**
 * The upstream's HTTP answer as Node gives it: what undici's `request()` resolves to, as it is
 * (a `node:http` response fits too, as `{ statusCode, headers, body: res }`).
 */
export interface ProviderAnswer {
  statusCode: number;
  /** By lower-case name. */
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The answer's bytes (Buffers or strings): JSON, or server-sent events when `body.stream` is true. */
  body: Readable;
}

/**
 * An upstream as the handlers see it: one method per endpoint format it speaks, each answering
 * with the upstream's own HTTP answer (JSON, or server-sent events when `body.stream` is true), as
 * a `ProviderAnswer` (Node streams, the fast way: undici's `request()` result is one) or a fetch
 * `Response`. A provider leaves out the endpoints it does not speak: calls in those formats reach
 * its `neutral` face when it has one, else are translated to a format it speaks (lib/models/formats/). Any object of this shape can
 * be given to the model handlers: the built-in ones (`openAIProvider()`, `anthropicProvider()`,
 * `echoProvider()`) are examples, not a closed list.
 * @example
 * const pool = new Pool('http://llm.internal'); // from undici: one keep-alive pool for every call
 * const mine: Provider = {
 *   id: 'in-house',
 *   chatCompletions: ({ body, signal }) =>
 *     pool.request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal }),
 *   close: () => pool.close(),
 * };
 */
export interface Provider {
  /** The name catalog models refer to it by. */
  readonly id: string;
  /**
   * What traces say of its calls: `gen_ai.provider.name` (`openai`, `anthropic`, ...; default:
   * the provider's `id`) and the upstream's host and port (`server.address`, `server.port`).
   */
  readonly telemetry?: ProviderTelemetry;
  /** OpenAI's Chat Completions (`POST /v1/chat/completions`). */
  chatCompletions?(request: ProviderRequest): Promise<ProviderAnswer | Response>;
  /** OpenAI's Responses (`POST /v1/responses`). */
  responses?(request: ProviderRequest): Promise<ProviderAnswer | Response>;
  /** Anthropic's Messages (`POST /v1/messages`). */
  messages?(request: ProviderRequest): Promise<ProviderAnswer | Response>;
  /** Anthropic's token count of a Messages request (`POST /v1/messages/count_tokens`): JSON only, never a stream. */
  countTokens?(request: ProviderRequest): Promise<ProviderAnswer | Response>;
  /**
   * The neutral representation (lib/models/formats/neutral.ts), for an API that is none of the
   * client formats (Gemini's, Bedrock's): a call in a format the provider has no method for is
   * read into a neutral request by that format's reader, and the neutral answer or stream written
   * back in it, as a translated call's is.
   */
  readonly neutral?: NeutralProtocol;
  /** OpenAI's embeddings (`POST /v1/embeddings`): JSON only, passed through as it is when the batch fits `embeddingInputsPerCall`. */
  embeddings?(request: ProviderRequest): Promise<ProviderAnswer | Response>;
  /**
   * Embeddings in the neutral representation, for a provider whose API is not OpenAI's: the
   * endpoint writes OpenAI's answer (floats or base64) from the vectors. Throw an
   * `UpstreamStatusError` for an upstream's HTTP error, as `neutral` does.
   */
  embed?(request: EmbedRequest): Promise<EmbedAnswer>;
  /**
   * The most inputs one embeddings call of this provider takes: a longer input array is split,
   * sent in order and the answers joined, usage summed. Default: no limit.
   */
  readonly embeddingInputsPerCall?: number;
  /**
   * Releases what the provider holds (the built-in HTTP providers: their pool of connections), for
   * good: a gateway calls it on shutdown, once its HTTP server has closed.
   */
  close?(): Promise<void>;
}

/** The endpoint formats a provider may speak: its methods. */
export type ProviderEndpoint = Exclude<keyof Provider, 'id' | 'close' | 'telemetry' | 'neutral' | 'embed' | 'embeddingInputsPerCall'>;

/**
 * A provider's neutral face. A failure is thrown: an `UpstreamStatusError` for an upstream that
 * answered an HTTP error (a 429 and a 5xx retried on another deployment and counted towards its
 * cooldown, a 400 passed to the client with its message), any other error as a connection
 * failure (502, retried). After a stream's first part, a failure ends the client's stream in its
 * format's error event.
 * @example
 * const mine: Provider = {
 *   id: 'in-house',
 *   neutral: {
 *     name: 'In-house',
 *     generate: async ({ request, signal }) => toAnswer(await callUpstream(request, signal)),
 *     async *stream({ request, signal }) { for await (const event of callUpstreamStreaming(request, signal)) yield* toParts(event); },
 *   },
 * };
 */
export interface NeutralProtocol {
  /** Its API's name, as refusals name it ("'logprobs' cannot be sent to this model: its provider speaks Gemini ..."). */
  readonly name: string;
  /**
   * Refuses what the API cannot carry, before anything is sent or counted: throws
   * `untranslatable(request.params.field ?? 'field', name)` (a 400 naming the client's field).
   * Answers the client's fields it leaves out (hints such as `prompt_cache_key`), by name, for
   * `x-kmg-omitted`. Called again on the request `generate()` or `stream()` gets. Default:
   * everything the neutral request holds is carried.
   */
  check?(request: ReadRequest): string[];
  /** The whole answer of a call with `request.stream` false. */
  generate(call: NeutralCall): Promise<Answer>;
  /**
   * The answer of a call with `request.stream` true, part by part as the upstream tells it: a
   * `start` first, a `finish` (with the usage) last. Stopping the iteration (its `return()`) must
   * end the upstream call.
   */
  stream(call: NeutralCall): AsyncIterable<StreamPart>;
}

/** What a neutral provider is handed for one call. */
export interface NeutralCall {
  /** The call, read from the client's format; `model` is the upstream's name, attached files inlined. */
  request: ReadRequest;
  /** As `ProviderRequest.headers`. */
  headers: Readonly<Record<string, string>>;
  /** As `ProviderRequest.signal`: pass it to the upstream call, stream included. */
  signal: AbortSignal;
  /** As `ProviderRequest.traceHeaders`. */
  traceHeaders?: Readonly<Record<string, string>> | undefined;
  /** The most bytes to read of the upstream's JSON answer, or of one event of its stream (`maxUpstreamBytes`). */
  maxBytes: number;
}

/**
 * An upstream's HTTP error, thrown by a neutral provider (`generate()`, `stream()` before its first
 * part, `embed()`): answered as the same status from a provider of a client format is. A refusal
 * (400, 413, 422, 429) reaches the client with its status, `message` and `code`, a 429 with its
 * `retryAfter` (seconds), which the deployment's cooldown also follows; any other status is a
 * 502, retried on another deployment when routing retries that status (429, 5xx). `message` is
 * the upstream's own words: keep credentials out of it.
 * @example throw new UpstreamStatusError(429, 'Resource has been exhausted', { code: 'RESOURCE_EXHAUSTED', retryAfter: '7' })
 */
export class UpstreamStatusError extends Error {
  readonly status: number;
  readonly code: string | undefined;
  readonly retryAfter: string | undefined;

  constructor(status: number, message: string, options: { code?: string | undefined; retryAfter?: string | undefined; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'UpstreamStatusError';
    this.status = status;
    this.code = options.code;
    this.retryAfter = options.retryAfter;
  }
}

/** One neutral embeddings call: `inputs` in order, each a text or an array of token ids. */
export interface EmbedRequest {
  /** The upstream's name of the model. */
  model: string;
  inputs: ReadonlyArray<string | readonly number[]>;
  /** The length of the vectors asked for, when the client asked. */
  dimensions?: number | undefined;
  /** Aborted when the upstream is too slow or the client goes away. */
  signal: AbortSignal;
  /** As `ProviderRequest.traceHeaders`. */
  traceHeaders?: Readonly<Record<string, string>> | undefined;
}

/** The answer of a neutral embeddings call: one vector per input, in the inputs' order. */
export interface EmbedAnswer {
  vectors: Float32Array[];
  /** The tokens of the inputs. */
  inputTokens: number;
}

/** A provider's `telemetry`. */
export interface ProviderTelemetry {
  /** The OpenTelemetry GenAI conventions' `gen_ai.provider.name`: `openai`, `anthropic`, `aws.bedrock`, ... */
  providerName: string;
  /** The upstream's host name or address. */
  serverAddress?: string;
  serverPort?: number;
}
