import { errors } from '../../../errors/gateway-error.js';
import type { Format } from '../format.js';
import { openAIErrorEvent } from '../chat-completions/error-event.js';
import { embeddingsAnswer, readEmbeddingsUsage } from './answer.js';
import { checkEmbeddingsBody } from './request.js';
import { embeddingsTrace } from './trace.js';

/** OpenAI's embeddings. */
export const embeddingsFormat: Format = {
  name: 'Embeddings',
  endpoint: 'embeddings',
  path: '/v1/embeddings',
  scope: 'embeddings:create',
  operation: 'embeddings',
  modelNotAllowed: (model) => errors.modelNotAllowed(model),
  modelNotFound: (model) => errors.modelDoesNotExist(model),
  checkBody: checkEmbeddingsBody,
  unsupported: (model) => errors.invalidRequest(`The model '${model}' is not served on /v1/embeddings: its provider has no embeddings`),
  // Embeddings take no files.
  fileReferences: { map: (body) => body, inline: (part) => part },
  forwardHeaders: [],
  errorEvent: (err) => openAIErrorEvent(err),
  answer: embeddingsAnswer,
  readUsage: readEmbeddingsUsage,
  trace: embeddingsTrace,
  sample: {
    headers: {},
    request: (model) => ({ model, input: 'Hello' }),
    answer: ["object 'list'", (body) => body.object === 'list'],
    namesModel: true,
    ends: null,
    shapeB: false,
  },
};
