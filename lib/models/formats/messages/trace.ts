import { isObject } from '../../content.js';
import type { AnswerTrace } from '../format.js';
import { readMessagesDeltaUsage, readMessagesUsage } from './answer.js';

/** What a trace records of a Messages answer: its stop reason and text blocks; a stream's input from `message_start`, its output from `message_delta`. */
export const messagesTrace: AnswerTrace = {
  parameters: {
    max_tokens: 'gen_ai.request.max_tokens',
    temperature: 'gen_ai.request.temperature',
    top_p: 'gen_ai.request.top_p',
    top_k: 'gen_ai.request.top_k',
    stop_sequences: 'gen_ai.request.stop_sequences',
  },
  json(body, into) {
    into.ids(body.id, body.model);
    if (isObject(body.usage)) into.usage(readMessagesUsage(body.usage));
    into.finish(body.stop_reason, 0);
    if (!Array.isArray(body.content)) return;
    for (const block of body.content) if (isObject(block) && block.type === 'text') into.text(0, block.text);
  },
  event(data, into) {
    switch (data.type) {
      case 'message_start':
        if (!isObject(data.message)) return;
        into.ids(data.message.id, data.message.model);
        if (isObject(data.message.usage)) into.usage(readMessagesUsage(data.message.usage));
        return;
      case 'message_delta':
        if (isObject(data.delta)) into.finish(data.delta.stop_reason, 0);
        if (isObject(data.usage)) into.usage(readMessagesDeltaUsage(data.usage));
        return;
      case 'content_block_delta':
        if (isObject(data.delta)) into.text(0, data.delta.text);
        return;
      default:
    }
  },
};
