import type { GatewayError } from '../errors/gateway-error.js';
import type { JsonObject } from './content.js';
import type { AnswerFormat } from './answer.js';
import type { FileReferences } from './attachments.js';
import type { ProviderEndpoint } from './provider.js';

/** What differs between the endpoints. */
export interface EndpointFormat {
  endpoint: ProviderEndpoint;
  /**
   * The answer for a model outside the key's allowlist, given before the request is validated
   * further. Left out (Messages), such a model gets `modelNotFound`, at the same point as an
   * unknown one, so that the two cannot be told apart.
   */
  modelNotAllowed?: (model: string) => GatewayError;
  modelNotFound: (model: string) => GatewayError;
  /**
   * Refuses (400, by name) a body without what the format requires of every call (Chat Completions'
   * `messages`, Messages' `max_tokens`), checked before the model is looked up: a native call is
   * forwarded as it is, and one its provider would refuse must be neither sent nor counted.
   */
  checkBody: (body: JsonObject) => void;
  /** The model's provider does not speak this endpoint's format, nor one it can be translated to. */
  unsupported: (model: string) => GatewayError;
  fileReferences: FileReferences;
  /** Client headers passed to the provider, lower-case. */
  forwardHeaders: readonly string[];
  /** A failure after the stream has started, as an event of this format. */
  errorEvent: (err: GatewayError, requestId: string) => string;
  /** Where its answers carry usage and the model's name. */
  answer: AnswerFormat;
}
