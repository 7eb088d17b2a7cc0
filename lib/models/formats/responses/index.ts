import type { WireFormat } from '../wire-format.js';
import { writeResponsesAnswer } from './answer.js';
import { readResponsesAnswer, ResponsesStreamReader, writeResponsesRequest } from './provider.js';
import { readResponsesRequest } from './request.js';
import { ResponsesStreamWriter } from './stream.js';

/** OpenAI's Responses. */
export const responsesFormat: WireFormat = {
  name: 'Responses',
  client: { readRequest: readResponsesRequest, writeAnswer: writeResponsesAnswer, streamWriter: (request) => new ResponsesStreamWriter(request) },
  provider: { writeRequest: writeResponsesRequest, readAnswer: readResponsesAnswer, streamReader: () => new ResponsesStreamReader() },
};
