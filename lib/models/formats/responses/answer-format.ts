import type { TokenUsage } from '../../../usage/token-usage.js';
import { eventObject, textLength, upstreamStreamFailure, type AnswerFormat } from '../../answer.js';
import { isObject, type JsonObject } from '../../content.js';
import { readResponsesUsage } from './answer.js';
import { eventFields, withData } from '../../../http/server-sent-events.js';

/** The stream events whose `response` is the whole response object so far. */
export const RESPONSE_EVENTS: ReadonlySet<string> = new Set([
  'response.created',
  'response.queued',
  'response.in_progress',
  'response.completed',
  'response.incomplete',
  'response.failed',
]);

/**
 * Where a Responses answer keeps its response object, which names the model (`model`) and, once
 * the answer is over, counts its tokens (`usage`): the JSON answer is that object; in a stream,
 * it is the `response` of the events in `RESPONSE_EVENTS`, `usage` set in the last one
 * (`response.completed`, or `response.incomplete` / `response.failed`). Undefined for any other
 * event.
 * @example const model = findResponseObject(JSON.parse(data), true)?.model
 */
export function findResponseObject(answerOrEvent: JsonObject, streamed: boolean): JsonObject | undefined {
  if (!streamed) return answerOrEvent;
  const { type, response } = answerOrEvent;
  return typeof type === 'string' && RESPONSE_EVENTS.has(type) && isObject(response) ? response : undefined;
}

/**
 * The tokens a response object counts (`usage.input_tokens`, `usage.output_tokens`), or
 * undefined while it has no usage.
 * @example const usage = responseUsage(findResponseObject(answer, false) ?? {})
 */
export function responseUsage(response: JsonObject): TokenUsage | undefined {
  const { usage } = response;
  if (!isObject(usage) || typeof usage.input_tokens !== 'number' || typeof usage.output_tokens !== 'number') return undefined;
  return readResponsesUsage(usage);
}

/** The events that end a whole stream: the response's last state, whatever it is. */
const FINAL_EVENTS: ReadonlySet<string> = new Set(['response.completed', 'response.incomplete', 'response.failed']);

function renamed(response: JsonObject, model: string): void {
  if (typeof response.model === 'string') response.model = model;
}

/**
 * Responses answers: the JSON answer is the response object, with `model` and `usage.input_tokens`
 * / `output_tokens`; in a stream, the `response.*` events of `RESPONSE_EVENTS` carry the response
 * object so far, its `usage` set in the last (`response.completed`, `response.incomplete` or
 * `response.failed`). Only those events are parsed (an event's name is its type); the
 * content events pass as they came; the last of those ends a whole stream. A stream reports usage
 * without being asked. An `error` event
 * is the gateway's own to tell (`upstreamStreamFailure`).
 */
export const responsesAnswer: AnswerFormat = {
  json(answer, model) {
    renamed(answer, model);
    return responseUsage(answer) ?? { inputTokens: 0, outputTokens: 0 };
  },
  stream(_request, model) {
    const usage: TokenUsage = { inputTokens: 0, outputTokens: 0 };
    let outputChars = 0;
    let finished = false;
    return {
      usage,
      get outputChars() {
        return outputChars;
      },
      get finished() {
        return finished;
      },
      event(event) {
        const { name, data } = eventFields(event);
        if (name === 'error') throw upstreamStreamFailure(eventObject(data));
        if (name !== undefined && FINAL_EVENTS.has(name)) finished = true;
        // Text, refusals, reasoning and tool arguments come in pieces, each a `*.delta` event's `delta`.
        if (name?.endsWith('.delta')) {
          outputChars += textLength(eventObject(data)?.delta);
          return event;
        }
        if (name !== undefined && !RESPONSE_EVENTS.has(name)) return event;
        const parsed = eventObject(data);
        const response = parsed && findResponseObject(parsed, true);
        if (parsed === undefined || response === undefined) return event;
        const counted = responseUsage(response);
        if (counted !== undefined) Object.assign(usage, counted);
        renamed(response, model);
        return withData(event, JSON.stringify(parsed));
      },
    };
  },
};
