import type { FinishReason } from '../neutral.js';

/** Messages' `stop_reason` → neutral; anything else is `other`. */
export const FROM_MESSAGES_STOP: Readonly<Record<string, FinishReason>> = {
  end_turn: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool-calls',
  stop_sequence: 'stop-sequence',
  refusal: 'refusal',
  pause_turn: 'pause',
};

/** Neutral → Messages' `stop_reason`; a content filter is Anthropic's `refusal`. */
export const TO_MESSAGES_STOP: Readonly<Record<FinishReason, string>> = {
  stop: 'end_turn',
  length: 'max_tokens',
  'tool-calls': 'tool_use',
  'stop-sequence': 'stop_sequence',
  'content-filter': 'refusal',
  refusal: 'refusal',
  pause: 'pause_turn',
  other: 'end_turn',
};
