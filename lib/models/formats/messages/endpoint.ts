import type { Middleware } from 'koa';
import { errors } from '../../../errors/gateway-error.js';
import { messagesAnswer } from './answer-format.js';
import { isObject, mapMessagesContentBlocks } from '../../content.js';
import type { EndpointFormat } from '../../endpoint-format.js';
import { modelEndpoint, type ModelEndpointOptions } from '../../model-endpoint.js';
import { checkMessages, checkStream, checkTokenLimit } from '../wire-format.js';
import { anthropicErrorEvent } from './error-event.js';

const FILES_IN_DOCUMENTS_ONLY = 'Files are attached as {"type":"document","source":{"type":"file","file_id"}} blocks only';

/** The Messages format; `countTokens()` reads the same bodies. */
export const MESSAGES: EndpointFormat = {
  endpoint: 'messages',
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
};

/**
 * `POST /v1/messages` in Anthropic's format, Shape B errors: put it behind `anthropicErrors()`,
 * `apiKey()` and `requireScope('messages:create')`. A model that is unknown or outside the key's
 * allowlist gets the same 404 `Model not found`; an allowed one is renamed to its `upstreamModel`
 * and sent to its provider with the provider's own credentials and the client's
 * `anthropic-version` and `anthropic-beta`. A block `{"type":"document","source":{"type":"file",
 * "file_id"}}` (needs `files:read` too) is sent as the stored PDF itself, a `base64`
 * `application/pdf` source titled with the file name. With `"stream": true` the upstream's events
 * pass through as they arrive; a failure after that is an `event: error`. Answers name the catalog
 * id; the key's limits are applied after the checks above (429 with `anthropic-ratelimit-*`). For
 * usage records and metrics, put `meterModelCalls()` before it (`modelsRouter()` does).
 * @example
 * router.post('/v1/messages', anthropicErrors(), apiKey({ store }), requireScope('messages:create'),
 *   messages({ catalog, providers, files, blobs }))
 */
export function messages(options: ModelEndpointOptions): Middleware {
  const handle = modelEndpoint(MESSAGES, options);
  return async function messages(ctx) {
    await handle(ctx);
  };
}
