import type { TokenUsage } from '../../../usage/token-usage.js';
import { eventObject, textLength, tokenCount, upstreamStreamFailure, type AnswerFormat } from '../../answer.js';
import { isObject, type JsonObject } from '../../content.js';
import { eventFields, withData } from '../../../http/server-sent-events.js';

// Input as Anthropic bills it: cache writes and reads are input tokens too, reported apart.
const inputOf = (usage: JsonObject) =>
  tokenCount(usage.input_tokens) + tokenCount(usage.cache_creation_input_tokens) + tokenCount(usage.cache_read_input_tokens);

const cacheOf = (usage: JsonObject) => ({
  cacheReadTokens: tokenCount(usage.cache_read_input_tokens),
  cacheWriteTokens: tokenCount(usage.cache_creation_input_tokens),
});

const usageOf = (usage: unknown): TokenUsage =>
  isObject(usage) ? { inputTokens: inputOf(usage), outputTokens: tokenCount(usage.output_tokens), ...cacheOf(usage) } : { inputTokens: 0, outputTokens: 0 };

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
    return usageOf(answer.usage);
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
          if (isObject(parsed.usage)) {
            if ('output_tokens' in parsed.usage) usage.outputTokens = tokenCount(parsed.usage.output_tokens);
            if ('input_tokens' in parsed.usage) Object.assign(usage, { inputTokens: inputOf(parsed.usage) }, cacheOf(parsed.usage));
          }
          return event;
        }
        const message = parsed.message;
        if (!isObject(message)) return event;
        Object.assign(usage, usageOf(message.usage));
        if (typeof message.model === 'string') message.model = model;
        return withData(event, JSON.stringify(parsed));
      },
    };
  },
};
