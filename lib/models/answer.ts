import { errors, type GatewayError } from '../errors/gateway-error.js';
import type { TokenUsage } from '../usage/token-usage.js';
import { isObject, type JsonObject } from './content.js';

/**
 * What one endpoint format knows about its answers: where the upstream reports usage, in a JSON
 * answer and in a stream, how to ask for it, and where the answer names the model (which the
 * client sees as the catalog id it asked for, never the upstream's name). The shared forwarding
 * code stays generic: a new format declares its own `AnswerFormat`.
 */
export interface AnswerFormat {
  /** The upstream body of a streamed call, asking for usage where the format must ask for it. Default: unchanged. */
  streamRequest?(body: JsonObject): JsonObject;
  /** A JSON answer: sets its model to `model` in place, and returns its usage. */
  json(answer: JsonObject, model: string): TokenUsage;
  /** A reader of one streamed answer; `request` is the client's own body (what it asked for). */
  stream(request: JsonObject, model: string): StreamedAnswer;
}

/** Reads a streamed answer one event at a time, as it passes. */
export interface StreamedAnswer {
  /**
   * One whole event as the upstream sent it (`splitEvents()`), and what the client gets instead:
   * the same text when nothing changes, '' to withhold it. Parses only the events it needs to.
   * Throws `upstreamStreamFailure()` for the upstream's error event: the client's stream ends with
   * the gateway's own error event instead (or, before its first event, the call fails and may be
   * retried).
   */
  event(event: string): string;
  /** The usage read so far. */
  readonly usage: TokenUsage;
  /**
   * The characters of generated text, tool arguments and reasoning relayed so far: what estimates
   * the output of a stream the client left before the upstream told its usage. Default: 0.
   */
  readonly outputChars?: number;
  /**
   * True once the format's last event has passed (`[DONE]`, `message_stop`, `response.completed`):
   * a stream that ends while it is false was cut off, and the client gets an error event instead
   * of an answer that looks whole. Undefined: the format cannot tell, and any end is taken as whole.
   */
  readonly finished?: boolean;
}

/** The length of a piece of generated text in an event, or 0 when it is not a string. */
export const textLength = (value: unknown) => (typeof value === 'string' ? value.length : 0);

/** A token count as an upstream reports it: anything but a non-negative safe integer counts 0. */
export function tokenCount(value: unknown): number {
  return Number.isSafeInteger(value) && (value as number) >= 0 ? (value as number) : 0;
}

/** The JSON object in an event's data, or undefined for anything else (`[DONE]`, a comment, bad JSON). */
export function eventObject(data: string | undefined): JsonObject | undefined {
  if (data === undefined || !data.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(data);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** How long the error type an upstream names may be, in the log: what an API names, not a message. */
const MAX_KIND_CHARS = 64;

/**
 * The failure an upstream's error event in a stream stands for: 502 `upstream_error`, whatever it
 * says. Its `cause`, for the log, names only the event's error `type` or `code`: the upstream's
 * message may carry its address, its key or the prompt, which neither the client nor the log gets.
 * @example if (isObject(chunk.error)) throw upstreamStreamFailure(chunk.error)
 */
export function upstreamStreamFailure(error: unknown): GatewayError {
  const err = errors.upstreamError();
  const kind = isObject(error) ? [error.type, error.code].find((value) => typeof value === 'string' && value !== '') : undefined;
  err.cause = kind === undefined ? "the upstream's stream failed" : `the upstream's stream failed: ${(kind as string).slice(0, MAX_KIND_CHARS)}`;
  return err;
}

/**
 * The failure of a stream with an event the gateway cannot read (its data not JSON, or not the
 * shape of the format's events): 502 `upstream_error`, never an answer that looks whole and empty.
 * Its `cause`, for the log, says `what` was wrong, never the event's text.
 * @example if (typeof data.type !== 'string') throw unreadableStreamEvent('an event without a type')
 */
export function unreadableStreamEvent(what: string): GatewayError {
  const err = errors.upstreamError();
  err.cause = `the upstream's stream sent ${what}`;
  return err;
}
