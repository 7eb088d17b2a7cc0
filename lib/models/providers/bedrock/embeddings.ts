import { errors } from '../../../errors/gateway-error.js';
import { isObject, type JsonObject } from '../../content.js';
import { untranslatable } from '../../formats/neutral.js';
import type { EmbedAnswer, EmbedRequest } from '../../provider.js';

// Embeddings through InvokeModel, in each model family's own body: Cohere's (`cohere.embed-*`)
// or Amazon Titan's (any other model id), one input a call.

const isCohere = (model: string) => /(^|[.:/])cohere\.embed/.test(model);

/** The InvokeModel body of one input: Titan's `inputText` (with `dimensions` where asked), or Cohere's `texts`. */
export function embedBody({ model, inputs, dimensions }: EmbedRequest): JsonObject {
  const [input] = inputs;
  if (inputs.length !== 1 || typeof input !== 'string') throw untranslatable('input (token ids)', 'Bedrock');
  if (isCohere(model)) {
    if (dimensions !== undefined) throw untranslatable('dimensions', "Cohere's embeddings on Bedrock");
    return { texts: [input], input_type: 'search_document', embedding_types: ['float'] };
  }
  return { inputText: input, ...(dimensions !== undefined && { dimensions }) };
}

const isVector = (value: unknown): value is number[] => Array.isArray(value) && value.every((item) => typeof item === 'number');

/**
 * The vector and input tokens of an InvokeModel answer: Titan's `embedding` and
 * `inputTextTokenCount`, or Cohere's `embeddings.float[0]` (or `embeddings[0]`); `headerTokens`,
 * Bedrock's `x-amzn-bedrock-input-token-count`, where the body counts none (Cohere's).
 */
export function readEmbedding(model: string, body: JsonObject, headerTokens: number | undefined): EmbedAnswer {
  let vector: unknown;
  let tokens: unknown;
  if (isCohere(model)) {
    const { embeddings } = body;
    vector = isObject(embeddings) && Array.isArray(embeddings.float) ? embeddings.float[0] : Array.isArray(embeddings) ? embeddings[0] : undefined;
  } else {
    vector = body.embedding;
    tokens = body.inputTextTokenCount;
  }
  if (!isVector(vector)) throw errors.upstreamError();
  const inputTokens = typeof tokens === 'number' && Number.isSafeInteger(tokens) && tokens >= 0 ? tokens : (headerTokens ?? 0);
  return { vectors: [Float32Array.from(vector)], inputTokens };
}
