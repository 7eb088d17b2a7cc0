import type { Middleware } from 'koa';
import { errors } from '../../../errors/gateway-error.js';
import { isObject, mapResponsesContentParts, type JsonObject } from '../../content.js';
import type { EndpointFormat } from '../../endpoint-format.js';
import { modelEndpoint, type ModelEndpointOptions } from '../../model-endpoint.js';
import { responsesAnswer } from './answer-format.js';
import { invalid } from '../neutral.js';
import { checkStream, checkTokenLimit } from '../wire-format.js';
import { responsesErrorEvent } from './error-event.js';

export { RESPONSE_EVENTS, findResponseObject, responseUsage } from './answer-format.js';

const FILES_IN_INPUT_FILE_ONLY = 'Files are attached as {"type":"input_file","file_id"} parts only';

const RESPONSES: EndpointFormat = {
  endpoint: 'responses',
  modelNotAllowed: (model) => errors.modelNotAllowed(model),
  modelNotFound: (model) => errors.modelDoesNotExist(model),
  checkBody: (body) => {
    if (typeof body.input !== 'string' && !Array.isArray(body.input)) throw invalid('input', 'must be a string or an array');
    checkTokenLimit(body, 'max_output_tokens');
    checkStream(body.stream);
  },
  unsupported: (model) =>
    errors.invalidRequest(`The model '${model}' is not served on /v1/responses: its provider speaks no format a Responses call can be translated to`),
  fileReferences: {
    // {"type":"input_file","file_id":"file-..."}; one with file_data or file_url is the client's own
    // and passes as it is. Any other part naming a file (an input_image with a file_id) would be
    // resolved upstream in the operator's own account, with the operator's key: refused.
    map: (body, replace) =>
      mapResponsesContentParts(body, (part) => {
        if (!isObject(part) || !('file_id' in part)) return part;
        if (part.type === 'input_file') return replace(part.file_id, part);
        throw errors.invalidRequest(FILES_IN_INPUT_FILE_ONLY);
      }),
    inline: (part, file) => {
      const inlined: JsonObject = { ...part, filename: file.filename, file_data: `data:application/pdf;base64,${file.data}` };
      delete inlined.file_id;
      return inlined;
    },
  },
  forwardHeaders: [],
  errorEvent: (err) => responsesErrorEvent(err),
  answer: responsesAnswer,
};

/**
 * `POST /v1/responses` in OpenAI's Responses format, Shape A errors: put it behind `openAIErrors()`,
 * `apiKey()` and `requireScope('responses:create')`. The allowlist policy of Chat Completions
 * (outside the list: 403 `Model '<id>' is not allowed for this API key`; not in the catalog: 404
 * `The model '<id>' does not exist`); a model whose provider has no `responses` method is translated to a format it speaks. An
 * input part `{"type":"input_file","file_id"}` (needs `files:read` too) is sent as the stored PDF
 * itself: `{"type":"input_file","filename","file_data":"data:application/pdf;base64,..."}`. With
 * `"stream": true` the upstream's events pass through as they arrive; a failure after that is an
 * `event: error`. Answers name the catalog id; the key's limits are applied after the checks above
 * (429 with `x-ratelimit-*`). For usage records and metrics, put `meterModelCalls()` before it
 * (`modelsRouter()` does).
 * @example
 * router.post('/v1/responses', requireScope('responses:create'),
 *   responses({ catalog, providers, files, blobs }))
 */
export function responses(options: ModelEndpointOptions): Middleware {
  const handle = modelEndpoint(RESPONSES, options);
  return async function responses(ctx) {
    await handle(ctx);
  };
}
