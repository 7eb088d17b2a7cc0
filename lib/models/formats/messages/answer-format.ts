import type { TokenUsage } from '../../../usage/token-usage.js';
import { eventObject, textLength, upstreamStreamFailure, type AnswerFormat } from '../../answer.js';
import { isObject } from '../../content.js';
import { readMessagesDeltaUsage, readMessagesUsage } from './answer.js';
import { eventFields, withData } from '../../../http/server-sent-events.js';

/**
 * Messages answers: `usage` (input, cache writes and reads, output) and `model` in a JSON answer;
 * in a stream, `message_start` carries the model and the input usage, and each `message_delta`
 * the output so far (and, in newer versions, the input again). Only those two events are parsed;
 * the content events pass as they came; `message_stop` ends a whole stream. An `error` event is
 * the gateway's own to tell (`upstreamStreamFailure`).
 */
export const messagesAnswer: AnswerFormat = {
  json(answer, model) {
    if (typeof answer.model === 'string') answer.model = model;
    return readMessagesUsage(answer.usage);
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
        if (name === 'error') throw upstreamStreamFailure(eventObject(data)?.error);
        if (name === 'message_stop') finished = true;
        if (name === 'content_block_delta') {
          const delta = eventObject(data)?.delta;
          if (isObject(delta)) outputChars += textLength(delta.text) + textLength(delta.partial_json) + textLength(delta.thinking);
          return event;
        }
        if (name !== 'message_start' && name !== 'message_delta') return event;
        const parsed = eventObject(data);
        if (parsed === undefined) return event;
        if (name === 'message_delta') {
          if (isObject(parsed.usage)) Object.assign(usage, readMessagesDeltaUsage(parsed.usage));
          return event;
        }
        const message = parsed.message;
        if (!isObject(message)) return event;
        Object.assign(usage, readMessagesUsage(message.usage));
        if (typeof message.model === 'string') message.model = model;
        return withData(event, JSON.stringify(parsed));
      },
    };
  },
};
