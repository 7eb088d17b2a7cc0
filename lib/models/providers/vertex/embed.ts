import { tokenCount } from '../../answer.js';
import { isObject } from '../../content.js';
import { untranslatable } from '../../formats/neutral.js';
import type { EmbedAnswer, EmbedRequest } from '../../provider.js';
import { DEFAULT_MAX_UPSTREAM_BYTES } from '../../upstream-call.js';
import { geminiError } from '../gemini/answer.js';
import type { GeminiTransport } from '../gemini/protocol.js';
import { upstreamJson } from '../neutral-http.js';

/** The most texts one `predict` call of Vertex AI's text embedding models takes (`text-embedding-005`). */
export const VERTEX_EMBEDDING_INPUTS_PER_CALL = 250;
/** Gemini's embedding models on Vertex AI take one text a call. */
const ONE_A_CALL = /^gemini-embedding/;

/**
 * Embeddings by Vertex AI's `predict` (`{ instances: [{ content }], parameters }`), in order, each
 * answer's `statistics.token_count` summed as the input's tokens; a Gemini embedding model one text
 * a call. Token ids are refused (400): the models embed text only.
 */
export function vertexEmbed(transport: GeminiTransport, name: string): (request: EmbedRequest) => Promise<EmbedAnswer> {
  return async ({ model, inputs, dimensions, signal, traceHeaders }) => {
    const texts = inputs.map((input) => {
      if (typeof input !== 'string') throw untranslatable('input (token ids)', name);
      return input;
    });
    const size = ONE_A_CALL.test(model) ? 1 : VERTEX_EMBEDDING_INPUTS_PER_CALL;
    const vectors: Float32Array[] = [];
    let inputTokens = 0;
    for (let at = 0; at < texts.length; at += size) {
      signal.throwIfAborted();
      const body = {
        instances: texts.slice(at, at + size).map((content) => ({ content })),
        ...(dimensions !== undefined && { parameters: { outputDimensionality: dimensions } }),
      };
      const answer = await upstreamJson(await transport.post(model, 'predict', body, { signal, traceHeaders }), DEFAULT_MAX_UPSTREAM_BYTES, geminiError);
      for (const prediction of Array.isArray(answer.predictions) ? answer.predictions : []) {
        const embeddings = isObject(prediction) && isObject(prediction.embeddings) ? prediction.embeddings : {};
        if (!Array.isArray(embeddings.values)) throw new Error('Vertex AI answered a prediction without values');
        vectors.push(Float32Array.from(embeddings.values as number[]));
        inputTokens += isObject(embeddings.statistics) ? tokenCount(embeddings.statistics.token_count) : 0;
      }
    }
    return { vectors, inputTokens };
  };
}
