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
   */
  event(event: string): string;
  /** The usage read so far. */
  readonly usage: TokenUsage;
}

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
