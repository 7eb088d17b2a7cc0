import { isObject } from '../../content.js';
import type { AnswerTrace } from '../format.js';
import { readEmbeddingsUsage } from './answer.js';

/** What a trace records of an embeddings answer: its model and input tokens (it generates none, and never streams). */
export const embeddingsTrace: AnswerTrace = {
  parameters: { dimensions: 'gen_ai.embeddings.dimension.count' },
  json(body, into) {
    into.ids(body.id, body.model);
    if (isObject(body.usage)) into.usage({ inputTokens: readEmbeddingsUsage(body.usage).inputTokens });
  },
  event: () => undefined,
};
