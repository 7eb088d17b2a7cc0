import type { Middleware } from 'koa';
import { errors } from '../../../errors/gateway-error.js';
import { chatCompletionsAnswer } from './answer-format.js';
import { isObject, mapChatContentParts } from '../../content.js';
import type { EndpointFormat } from '../../endpoint-format.js';
import { modelEndpoint, type ModelEndpointOptions } from '../../model-endpoint.js';
import { checkMessages, checkStream, checkTokenLimit } from '../wire-format.js';
import { openAIErrorEvent } from './error-event.js';

const CHAT_COMPLETIONS: EndpointFormat = {
  endpoint: 'chatCompletions',
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
};

/**
 * `POST /v1/chat/completions` in OpenAI's format, Shape A errors: put it behind `openAIErrors()`,
 * `apiKey()` and `requireScope('chat:completions')`. The model is looked up in `catalog` through the
 * key's allowlist (outside it: 403 `Model '<id>' is not allowed for this API key`; not in the
 * catalog: 404 `The model '<id>' does not exist`), renamed to its `upstreamModel` and sent to its
 * provider with the provider's own credentials. A content part `{"type":"file","file":{"file_id"}}`
 * (needs `files:read` too) is sent as the stored PDF itself: `{"type":"file","file":{"filename",
 * "file_data":"data:application/pdf;base64,..."}}`. With `"stream": true` the upstream's events
 * pass through as they arrive; a failure after that is a `data: {"error":{...}}` event. Answers
 * name the catalog id; the key's limits are applied after the checks above (429 with `x-ratelimit-*`).
 * For usage records and metrics, put `meterModelCalls()` before it (`modelsRouter()` does).
 * @example
 * router.post('/v1/chat/completions', requireScope('chat:completions'),
 *   chatCompletions({ catalog, providers, files, blobs }))
 */
export function chatCompletions(options: ModelEndpointOptions): Middleware {
  const handle = modelEndpoint(CHAT_COMPLETIONS, options);
  return async function chatCompletions(ctx) {
    await handle(ctx);
  };
}
