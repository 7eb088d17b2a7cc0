import type { WireFormat } from '../wire-format.js';
import { readMessagesAnswer, writeMessagesAnswer } from './answer.js';
import { readMessagesRequest, refuseBetas, writeMessagesRequest } from './request.js';
import { MessagesStreamReader, MessagesStreamWriter } from './stream.js';

/** Anthropic's Messages. */
export const messagesFormat: WireFormat = {
  name: 'Messages',
  client: { readRequest: readMessagesRequest, checkHeaders: refuseBetas, writeAnswer: writeMessagesAnswer, streamWriter: () => new MessagesStreamWriter() },
  provider: { writeRequest: writeMessagesRequest, readAnswer: readMessagesAnswer, streamReader: () => new MessagesStreamReader() },
};
