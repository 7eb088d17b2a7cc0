import type { WireFormat } from '../wire-format.js';
import { writeResponsesAnswer } from './answer.js';
import { readResponsesRequest } from './request.js';
import { ResponsesStreamWriter } from './stream.js';

/** OpenAI's Responses: a client's format only (a provider that speaks nothing else is not translated to). */
export const responsesFormat: WireFormat = {
  name: 'Responses',
  client: { readRequest: readResponsesRequest, writeAnswer: writeResponsesAnswer, streamWriter: (request) => new ResponsesStreamWriter(request) },
};
