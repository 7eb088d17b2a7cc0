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
}

/**
 * An upstream as the handlers see it: one method per endpoint format it speaks, each answering
 * with the upstream's own HTTP response (JSON, or server-sent events when `body.stream` is true).
 * A provider leaves out the endpoints it does not speak. Any object of this shape can be given
 * to the model handlers: the built-in ones (`openAIProvider()`, `anthropicProvider()`,
 * `echoProvider()`) are examples, not a closed list.
 * @example
 * const mine: Provider = {
 *   id: 'in-house',
 *   chatCompletions: ({ body, signal }) =>
 *     fetch('http://llm.internal/v1/chat/completions', { method: 'POST', body: JSON.stringify(body), signal }),
 * };
 */
export interface Provider {
  /** The name catalog models refer to it by. */
  readonly id: string;
  /** OpenAI's Chat Completions (`POST /v1/chat/completions`). */
  chatCompletions?(request: ProviderRequest): Promise<Response>;
  /** OpenAI's Responses (`POST /v1/responses`). */
  responses?(request: ProviderRequest): Promise<Response>;
  /** Anthropic's Messages (`POST /v1/messages`). */
  messages?(request: ProviderRequest): Promise<Response>;
  /** Anthropic's token count of a Messages request (`POST /v1/messages/count_tokens`): JSON only, never a stream. */
  countTokens?(request: ProviderRequest): Promise<Response>;
}

/** The endpoint formats a provider may speak: its methods. */
export type ProviderEndpoint = Exclude<keyof Provider, 'id'>;
