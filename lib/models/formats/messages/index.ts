import { errors } from '../../../errors/gateway-error.js';
import { isObject } from '../../content.js';
import { mapMessagesContentBlocks } from './content.js';
import type { Format, TranslatedFormat } from '../format.js';
import { checkMessages, checkStream, checkTokenLimit, type WireFormat } from '../wire-format.js';
import { readMessagesAnswer, readMessagesUsage, writeMessagesAnswer } from './answer.js';
import { messagesAnswer } from './answer-format.js';
import { anthropicErrorEvent } from './error-event.js';
import { readMessagesRequest, refuseBetas, writeMessagesRequest } from './request.js';
import { MessagesStreamReader, MessagesStreamWriter } from './stream.js';
import { messagesTrace } from './trace.js';

const NAME = 'Messages';

const translation: WireFormat = {
  name: NAME,
  client: { readRequest: readMessagesRequest, checkHeaders: refuseBetas, writeAnswer: writeMessagesAnswer, streamWriter: () => new MessagesStreamWriter() },
  provider: { writeRequest: writeMessagesRequest, readAnswer: readMessagesAnswer, streamReader: () => new MessagesStreamReader() },
};

const FILES_IN_DOCUMENTS_ONLY = 'Files are attached as {"type":"document","source":{"type":"file","file_id"}} blocks only';

/** Anthropic's Messages; `countTokensFormat` reads the same bodies. */
export const messagesFormat: TranslatedFormat = {
  name: NAME,
  endpoint: 'messages',
  path: '/v1/messages',
  scope: 'messages:create',
  operation: 'chat',
  translation,
  // No modelNotAllowed: a model outside the allowlist is told apart from an unknown one by nothing.
  modelNotFound: () => errors.modelNotFound(),
  checkBody: (body) => {
    checkMessages(body.messages);
    checkTokenLimit(body, 'max_tokens', true);
    checkStream(body.stream);
  },
  unsupported: (model) =>
    errors.invalidRequest(`The model '${model}' is not served on /v1/messages: its provider speaks no format a Messages call can be translated to`),
  fileReferences: {
    // {"type":"document","source":{"type":"file","file_id":"file-..."}}, also inside a tool_result.
    // Any other block naming a file (an image with a file source, a container_upload) would be
    // resolved upstream in the operator's own workspace, with the operator's key: refused.
    map: (body, replace) =>
      mapMessagesContentBlocks(body, (block) => {
        if (!isObject(block)) return block;
        const fileSource = isObject(block.source) && block.source.type === 'file';
        if (block.type === 'document' && fileSource && isObject(block.source)) return replace(block.source.file_id, block);
        if (fileSource || 'file_id' in block) throw errors.invalidRequest(FILES_IN_DOCUMENTS_ONLY);
        return block;
      }),
    // The stored name becomes the document's title unless the client gave one.
    inline: (block, file) => ({
      ...block,
      source: { type: 'base64', media_type: 'application/pdf', data: file.data },
      title: typeof block.title === 'string' ? block.title : file.filename,
    }),
  },
  forwardHeaders: ['anthropic-version', 'anthropic-beta'],
  errorEvent: (err, requestId) => anthropicErrorEvent(err, requestId),
  answer: messagesAnswer,
  readUsage: readMessagesUsage,
  trace: messagesTrace,
  sample: {
    headers: { 'anthropic-version': '2023-06-01' },
    request: (model, stream) => ({ model, max_tokens: 64, messages: [{ role: 'user', content: 'Hello' }], ...(stream && { stream }) }),
    answer: ["type 'message'", (body) => body.type === 'message'],
    namesModel: true,
    ends: (data) => data.includes('"type":"message_stop"'),
    shapeB: true,
  },
};

// A Messages body, counted rather than answered: the same allowlist policy and file references.
export const countTokensFormat: Format = {
  ...withoutTranslation(messagesFormat),
  name: 'Messages token count',
  endpoint: 'countTokens',
  path: '/v1/messages/count_tokens',
  operation: 'count_tokens',
  sample: {
    ...messagesFormat.sample,
    request: (model) => ({ model, messages: [{ role: 'user', content: 'Hello' }] }),
    answer: ['input_tokens, a number', (body) => typeof body.input_tokens === 'number'],
    namesModel: false,
    ends: null,
  },
  // A count has no answer to trace.
  trace: { parameters: messagesFormat.trace.parameters, json: () => undefined, event: () => undefined },
  // A count needs no output limit.
  checkBody: (body) => checkMessages(body.messages),
  unsupported: (model) =>
    errors.invalidRequest(`The model '${model}' has no token counting: its provider neither counts tokens nor speaks a format to estimate them for`),
};

function withoutTranslation({ translation: _, ...format }: TranslatedFormat): Format {
  return format;
}
