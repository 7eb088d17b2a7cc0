import test from 'ava';
import { readChatAnswer, writeChatAnswer } from '../../lib/models/formats/chat-completions/answer.js';
import { FROM_CHAT_FINISH, TO_CHAT_FINISH } from '../../lib/models/formats/chat-completions/finish-reasons.js';
import { readMessagesAnswer, writeMessagesAnswer } from '../../lib/models/formats/messages/answer.js';
import { FROM_MESSAGES_STOP, TO_MESSAGES_STOP } from '../../lib/models/formats/messages/finish-reasons.js';
import type { Answer, FinishReason } from '../../lib/models/formats/neutral.js';
import { writeResponsesAnswer } from '../../lib/models/formats/responses/answer.js';

// One test per row of each stop/finish reason table, through the answer readers and writers that
// use them: what an upstream says is what the client reads.

const answer = (finishReason: FinishReason, stopSequence?: string): Answer => ({
  id: 'id',
  model: 'm',
  created: 0,
  content: [{ type: 'text', text: 'x' }],
  finishReason,
  ...(stopSequence !== undefined && { stopSequence }),
  usage: { inputTokens: 1, outputTokens: 1 },
});

const fromMessages: Array<[string, FinishReason]> = [
  ['end_turn', 'stop'],
  ['max_tokens', 'length'],
  ['model_context_window_exceeded', 'length'],
  ['tool_use', 'tool-calls'],
  ['stop_sequence', 'stop-sequence'],
  ['refusal', 'refusal'],
  ['pause_turn', 'pause'],
];
test('the Messages stop_reason table has exactly the rows tested', (t) => t.deepEqual(Object.entries(FROM_MESSAGES_STOP), fromMessages));
for (const [stopReason, neutral] of fromMessages) {
  test(`Messages stop_reason ${stopReason} reads as ${neutral}`, (t) => {
    t.is(readMessagesAnswer({ content: [], stop_reason: stopReason, stop_sequence: stopReason === 'stop_sequence' ? 'END' : null }).finishReason, neutral);
  });
}
test('a Messages stop sequence keeps its value', (t) => {
  t.is(readMessagesAnswer({ content: [], stop_reason: 'stop_sequence', stop_sequence: '###' }).stopSequence, '###');
  t.like(writeMessagesAnswer(answer('stop-sequence', '###')), { stop_reason: 'stop_sequence', stop_sequence: '###' });
});

const toMessages: Array<[FinishReason, string]> = [
  ['stop', 'end_turn'],
  ['length', 'max_tokens'],
  ['tool-calls', 'tool_use'],
  ['stop-sequence', 'stop_sequence'],
  ['content-filter', 'refusal'],
  ['refusal', 'refusal'],
  ['pause', 'pause_turn'],
  ['other', 'end_turn'],
];
test('the neutral → Messages table has exactly the rows tested', (t) => t.deepEqual(Object.entries(TO_MESSAGES_STOP), toMessages));
for (const [neutral, stopReason] of toMessages) {
  test(`${neutral} is written as Messages stop_reason ${stopReason}`, (t) => t.is(writeMessagesAnswer(answer(neutral)).stop_reason, stopReason));
}

const fromChat: Array<[string, FinishReason]> = [
  ['stop', 'stop'],
  ['length', 'length'],
  ['tool_calls', 'tool-calls'],
  ['function_call', 'tool-calls'],
  ['content_filter', 'content-filter'],
];
test('the Chat Completions finish_reason table has exactly the rows tested', (t) => t.deepEqual(Object.entries(FROM_CHAT_FINISH), fromChat));
for (const [finishReason, neutral] of fromChat) {
  test(`Chat Completions finish_reason ${finishReason} reads as ${neutral}`, (t) => {
    t.is(readChatAnswer({ choices: [{ index: 0, message: { role: 'assistant', content: 'x' }, finish_reason: finishReason }] }).finishReason, neutral);
  });
}
test('a Chat Completions refusal reads as a refusal, its text kept', (t) => {
  const read = readChatAnswer({ choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: 'I cannot help.' }, finish_reason: 'stop' }] });
  t.is(read.finishReason, 'refusal');
  t.deepEqual(read.content, [{ type: 'text', text: 'I cannot help.' }]);
});

const toChat: Array<[FinishReason, string]> = [
  ['stop', 'stop'],
  ['length', 'length'],
  ['tool-calls', 'tool_calls'],
  ['stop-sequence', 'stop'],
  ['content-filter', 'content_filter'],
  ['refusal', 'content_filter'],
  ['pause', 'stop'],
  ['other', 'stop'],
];
test('the neutral → Chat Completions table has exactly the rows tested', (t) => t.deepEqual(Object.entries(TO_CHAT_FINISH), toChat));
for (const [neutral, finishReason] of toChat) {
  test(`${neutral} is written as Chat Completions finish_reason ${finishReason}`, (t) => {
    t.like(writeChatAnswer(answer(neutral)), { choices: [{ finish_reason: finishReason }] });
  });
}

const toResponses: Array<[FinishReason, string, unknown]> = [
  ['stop', 'completed', null],
  ['length', 'incomplete', { reason: 'max_output_tokens' }],
  ['tool-calls', 'completed', null],
  ['stop-sequence', 'completed', null],
  ['content-filter', 'incomplete', { reason: 'content_filter' }],
  ['refusal', 'incomplete', { reason: 'content_filter' }],
  ['pause', 'completed', null],
  ['other', 'completed', null],
];
const request = { model: 'm', stream: false, system: [], messages: [], tools: [] };
for (const [neutral, status, details] of toResponses) {
  test(`${neutral} is written as a Responses status ${status}`, (t) => {
    t.like(writeResponsesAnswer(answer(neutral), request), { status, incomplete_details: details });
  });
}
