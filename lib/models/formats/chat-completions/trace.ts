import { isObject } from '../../content.js';
import type { AnswerTrace } from '../format.js';
import { readChatUsage } from './answer.js';

/** What a trace records of a Chat Completions answer: every choice's finish reason and text, read from the message or the chunks' deltas. */
export const chatTrace: AnswerTrace = {
  json(body, into) {
    into.ids(body.id, body.model);
    if (isObject(body.usage)) into.usage(readChatUsage(body.usage));
    if (!Array.isArray(body.choices)) return;
    for (const choice of body.choices) {
      if (!isObject(choice)) continue;
      const index = typeof choice.index === 'number' ? choice.index : 0;
      into.finish(choice.finish_reason, index);
      if (isObject(choice.message)) into.text(index, choice.message.content);
    }
  },
  event(chunk, into) {
    into.ids(chunk.id, chunk.model);
    if (isObject(chunk.usage)) into.usage(readChatUsage(chunk.usage));
    if (!Array.isArray(chunk.choices)) return;
    for (const choice of chunk.choices) {
      if (!isObject(choice)) continue;
      const index = typeof choice.index === 'number' ? choice.index : 0;
      into.finish(choice.finish_reason, index);
      if (isObject(choice.delta)) into.text(index, choice.delta.content);
    }
  },
};
