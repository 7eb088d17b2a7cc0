import { errors } from '../../../errors/gateway-error.js';
import { isObject, type JsonObject } from '../../content.js';
import { mapResponsesContentParts } from './content.js';
import type { TranslatedFormat } from '../format.js';
import { invalid } from '../neutral.js';
import { checkStream, checkTokenLimit, type WireFormat } from '../wire-format.js';
import { readResponsesUsage, writeResponsesAnswer } from './answer.js';
import { responsesAnswer } from './answer-format.js';
import { responsesErrorEvent } from './error-event.js';
import { readResponsesAnswer, ResponsesStreamReader, writeResponsesRequest } from './provider.js';
import { readResponsesRequest } from './request.js';
import { ResponsesStreamWriter } from './stream.js';
import { responsesTrace } from './trace.js';

const NAME = 'Responses';

const translation: WireFormat = {
  name: NAME,
  client: { readRequest: readResponsesRequest, writeAnswer: writeResponsesAnswer, streamWriter: (request) => new ResponsesStreamWriter(request) },
  provider: { writeRequest: writeResponsesRequest, readAnswer: readResponsesAnswer, streamReader: () => new ResponsesStreamReader() },
};

const FILES_IN_INPUT_FILE_ONLY = 'Files are attached as {"type":"input_file","file_id"} parts only';

/** OpenAI's Responses. */
export const responsesFormat: TranslatedFormat = {
  name: NAME,
  endpoint: 'responses',
  path: '/v1/responses',
  scope: 'responses:create',
  operation: 'chat',
  translation,
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
  readUsage: readResponsesUsage,
  trace: responsesTrace,
  sample: {
    headers: {},
    request: (model, stream) => ({ model, input: 'Hello', ...(stream && { stream }) }),
    answer: ["object 'response'", (body) => body.object === 'response'],
    namesModel: true,
    ends: (data) => data.includes('"type":"response.completed"'),
    shapeB: false,
  },
};
