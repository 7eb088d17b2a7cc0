import type { WireFormat } from '../wire-format.js';
import { readChatAnswer, writeChatAnswer } from './answer.js';
import { readChatRequest, writeChatRequest } from './request.js';
import { ChatStreamReader, ChatStreamWriter } from './stream.js';

/** OpenAI's Chat Completions. */
export const chatCompletionsFormat: WireFormat = {
  name: 'Chat Completions',
  client: { readRequest: readChatRequest, writeAnswer: writeChatAnswer, streamWriter: () => new ChatStreamWriter() },
  provider: { writeRequest: writeChatRequest, readAnswer: readChatAnswer, streamReader: () => new ChatStreamReader() },
};
