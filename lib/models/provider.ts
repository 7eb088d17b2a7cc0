import type { Readable } from 'node:stream';

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
 * `Response`. A provider leaves out the endpoints it does not speak: calls in those formats are
 * translated to one it speaks (lib/models/formats/). Any object of this shape can
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
  /** OpenAI's embeddings (`POST /v1/embeddings`): JSON only, passed through as it is when the batch fits `embeddingInputsPerCall`. */
  embeddings?(request: ProviderRequest): Promise<ProviderAnswer | Response>;
  /**
   * Embeddings in the neutral representation, for a provider whose API is not OpenAI's: the
   * endpoint writes OpenAI's answer (floats or base64) from the vectors. Throw a `GatewayError`
   * (`errors.upstreamError()`, ...) for a failure.
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
export type ProviderEndpoint = Exclude<keyof Provider, 'id' | 'close' | 'telemetry' | 'embed' | 'embeddingInputsPerCall'>;

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
