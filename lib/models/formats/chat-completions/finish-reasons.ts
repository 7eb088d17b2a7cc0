import type { FinishReason } from '../neutral.js';

/** Chat Completions' `finish_reason` → neutral; anything else is `other`. */
export const FROM_CHAT_FINISH: Readonly<Record<string, FinishReason>> = {
  stop: 'stop',
  length: 'length',
  tool_calls: 'tool-calls',
  function_call: 'tool-calls',
  content_filter: 'content-filter',
};

/**
 * Neutral → Chat Completions' `finish_reason`. Chat Completions says `stop` for a stop sequence
 * (without naming it) and has no refusal reason: a refusal is `content_filter`, as OpenAI's own
 * moderation stop is.
 */
export const TO_CHAT_FINISH: Readonly<Record<FinishReason, string>> = {
  stop: 'stop',
  length: 'length',
  'tool-calls': 'tool_calls',
  'stop-sequence': 'stop',
  'content-filter': 'content_filter',
  refusal: 'content_filter',
  pause: 'stop',
  other: 'stop',
};
