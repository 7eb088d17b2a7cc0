import { isObject, type JsonObject } from '../../content.js';
import type { AnswerTrace, TracedAnswer } from '../format.js';
import { readChatUsage } from './answer.js';

/** Every choice's finish reason and text, from its `message` (a whole answer) or its `delta` (a chunk). */
function readChoices(body: JsonObject, into: TracedAnswer, part: 'message' | 'delta'): void {
  into.ids(body.id, body.model);
  if (isObject(body.usage)) into.usage(readChatUsage(body.usage));
  if (!Array.isArray(body.choices)) return;
  for (const choice of body.choices) {
    if (!isObject(choice)) continue;
    const index = typeof choice.index === 'number' ? choice.index : 0;
    into.finish(choice.finish_reason, index);
    const content = choice[part];
    if (isObject(content)) into.text(index, content.content);
  }
}

/** What a trace records of a Chat Completions answer: every choice's finish reason and text, read from the message or the chunks' deltas. */
export const chatTrace: AnswerTrace = {
  parameters: {
    max_tokens: 'gen_ai.request.max_tokens',
    max_completion_tokens: 'gen_ai.request.max_tokens',
    temperature: 'gen_ai.request.temperature',
    top_p: 'gen_ai.request.top_p',
    frequency_penalty: 'gen_ai.request.frequency_penalty',
    presence_penalty: 'gen_ai.request.presence_penalty',
    seed: 'gen_ai.request.seed',
    stop: 'gen_ai.request.stop_sequences',
  },
  json: (body, into) => readChoices(body, into, 'message'),
  event: (chunk, into) => readChoices(chunk, into, 'delta'),
};
