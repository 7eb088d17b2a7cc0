import { errors } from '../../../errors/gateway-error.js';
import { isObject } from '../../content.js';
import { mapChatContentParts } from './content.js';
import type { TranslatedFormat } from '../format.js';
import { checkMessages, checkStream, checkTokenLimit, type WireFormat } from '../wire-format.js';
import { readChatAnswer, readChatUsage, writeChatAnswer } from './answer.js';
import { chatTrace } from './trace.js';
import { chatCompletionsAnswer } from './answer-format.js';
import { openAIErrorEvent } from './error-event.js';
import { readChatRequest, writeChatRequest } from './request.js';
import { ChatStreamReader, ChatStreamWriter } from './stream.js';

const NAME = 'Chat Completions';

const translation: WireFormat = {
  name: NAME,
  client: { readRequest: readChatRequest, writeAnswer: writeChatAnswer, streamWriter: () => new ChatStreamWriter() },
  provider: { writeRequest: writeChatRequest, readAnswer: readChatAnswer, streamReader: () => new ChatStreamReader() },
};

/** OpenAI's Chat Completions. */
export const chatCompletionsFormat: TranslatedFormat = {
  name: NAME,
  endpoint: 'chatCompletions',
  path: '/v1/chat/completions',
  scope: 'chat:completions',
  operation: 'chat',
  translation,
  modelNotAllowed: (model) => errors.modelNotAllowed(model),
  modelNotFound: (model) => errors.modelDoesNotExist(model),
  checkBody: (body) => {
    checkMessages(body.messages);
    checkTokenLimit(body, 'max_tokens');
    checkTokenLimit(body, 'max_completion_tokens');
    checkStream(body.stream);
  },
  unsupported: (model) =>
    errors.invalidRequest(
      `The model '${model}' is not served on /v1/chat/completions: its provider speaks no format a Chat Completions call can be translated to`,
    ),
  fileReferences: {
    // {"type":"file","file":{"file_id":"file-..."}}; a part with file_data is the client's own and passes as it is.
    map: (body, replace) =>
      mapChatContentParts(body, (part) =>
        isObject(part) && part.type === 'file' && isObject(part.file) && 'file_id' in part.file ? replace(part.file.file_id, part) : part,
      ),
    inline: (part, file) => ({ ...part, file: { filename: file.filename, file_data: `data:application/pdf;base64,${file.data}` } }),
  },
  forwardHeaders: [],
  errorEvent: (err) => openAIErrorEvent(err),
  answer: chatCompletionsAnswer,
  readUsage: readChatUsage,
  trace: chatTrace,
  sample: {
    headers: {},
    request: (model, stream) => ({ model, messages: [{ role: 'user', content: 'Hello' }], ...(stream && { stream }) }),
    answer: ["object 'chat.completion'", (body) => body.object === 'chat.completion'],
    namesModel: true,
    ends: (data) => data === '[DONE]',
    shapeB: false,
  },
};
