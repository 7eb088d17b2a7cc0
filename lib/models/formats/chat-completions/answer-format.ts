import type { TokenUsage } from '../../../usage/token-usage.js';
import { eventObject, textLength, upstreamStreamFailure, type AnswerFormat } from '../../answer.js';
import { isObject, type JsonObject } from '../../content.js';
import { readChatUsage } from './answer.js';
import { eventFields, withData } from '../../../http/server-sent-events.js';

/** The characters of generated content in a chunk: text, refusal, reasoning and tool arguments. */
function deltaChars(chunk: JsonObject): number {
  const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
  const delta = isObject(choice) ? choice.delta : undefined;
  if (!isObject(delta)) return 0;
  let chars = textLength(delta.content) + textLength(delta.refusal) + textLength(delta.reasoning_content);
  if (Array.isArray(delta.tool_calls))
    for (const call of delta.tool_calls) if (isObject(call) && isObject(call.function)) chars += textLength(call.function.arguments);
  return chars;
}

/**
 * Chat Completions answers: `usage.prompt_tokens` / `completion_tokens` and `model` in a JSON
 * answer and in every chunk of a stream. A stream reports usage only when asked
 * (`stream_options.include_usage`): the gateway always asks, and when the client did not, it
 * withholds the extra final chunk (`choices: []` with `usage`) and the `usage: null` of the others,
 * so the client gets the stream it asked for. `data: [DONE]` ends a whole stream. An error chunk
 * (`{"error":{...}}`) is the gateway's own to tell (`upstreamStreamFailure`).
 */
export const chatCompletionsAnswer: AnswerFormat = {
  streamRequest(body) {
    const options = body.stream_options ?? {};
    // Something that is not an object is the upstream's to refuse, as it is.
    if (!isObject(options)) return body;
    return { ...body, stream_options: { ...options, include_usage: true } };
  },
  json(answer, model) {
    if (typeof answer.model === 'string') answer.model = model;
    return readChatUsage(answer.usage);
  },
  stream(request, model) {
    const clientAsked = isObject(request.stream_options) && request.stream_options.include_usage === true;
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
        const { data } = eventFields(event);
        if (data === '[DONE]') finished = true;
        const chunk = eventObject(data);
        if (chunk === undefined) return event;
        if (isObject(chunk.error)) throw upstreamStreamFailure(chunk.error);
        if (isObject(chunk.usage)) Object.assign(usage, readChatUsage(chunk.usage));
        outputChars += deltaChars(chunk);
        if (!clientAsked && 'usage' in chunk) {
          if (Array.isArray(chunk.choices) && chunk.choices.length === 0) return '';
          delete chunk.usage;
        }
        if (typeof chunk.model === 'string') chunk.model = model;
        return withData(event, JSON.stringify(chunk));
      },
    };
  },
};
