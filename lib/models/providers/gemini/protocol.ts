import type { JsonObject } from '../../content.js';
import { untranslatable } from '../../formats/neutral.js';
import type { EmbedAnswer, EmbedRequest, NeutralProtocol, ProviderAnswer } from '../../provider.js';
import { DEFAULT_MAX_UPSTREAM_BYTES } from '../../upstream-call.js';
import type { UpstreamRequest } from '../http.js';
import { upstreamEvents, upstreamJson } from '../neutral-http.js';
import { GeminiStream, geminiAnswer, geminiError } from './answer.js';
import { checkGeminiRequest, geminiRequest } from './request.js';

/** How one deployment of Gemini's API is reached: AI Studio's or Vertex AI's address and credentials. */
export interface GeminiTransport {
  /** POSTs `body` to the model's `method` (`generateContent`, `streamGenerateContent?alt=sse`, `batchEmbedContents`). */
  post(model: string, method: string, body: JsonObject, call: UpstreamRequest): Promise<ProviderAnswer>;
}

/** Gemini's protocol as a provider's neutral face; `name` says it in refusals. */
export function geminiProtocol(transport: GeminiTransport, name: string): NeutralProtocol {
  return {
    name,
    check: (request) => checkGeminiRequest(request, name),
    async generate({ request, signal, traceHeaders, maxBytes }) {
      const answer = await transport.post(request.model, 'generateContent', geminiRequest(request, name), { signal, traceHeaders });
      return geminiAnswer(await upstreamJson(answer, maxBytes, geminiError));
    },
    async *stream({ request, signal, traceHeaders, maxBytes }) {
      const answer = await transport.post(request.model, 'streamGenerateContent?alt=sse', geminiRequest(request, name), { signal, traceHeaders });
      const reader = new GeminiStream();
      for await (const chunk of upstreamEvents(answer, maxBytes, geminiError)) yield* reader.read(chunk);
      yield* reader.end();
    },
  };
}

/** The most texts one `batchEmbedContents` call takes. */
export const GEMINI_EMBEDDING_INPUTS_PER_CALL = 100;
const CHARS_PER_TOKEN = 4;

/**
 * Embeddings by `batchEmbedContents`: a text per request, in order. Gemini counts no tokens in its
 * answer: the input is estimated at four characters a token. Token ids are refused (400): Gemini
 * embeds text only.
 */
export function geminiEmbed(transport: GeminiTransport, name: string): (request: EmbedRequest) => Promise<EmbedAnswer> {
  return async ({ model, inputs, dimensions, signal, traceHeaders }) => {
    const texts = inputs.map((input) => {
      if (typeof input !== 'string') throw untranslatable('input (token ids)', name);
      return input;
    });
    const requests = texts.map((text) => ({
      model: `models/${model}`,
      content: { parts: [{ text }] },
      ...(dimensions !== undefined && { outputDimensionality: dimensions }),
    }));
    const answer = await transport.post(model, 'batchEmbedContents', { requests }, { signal, traceHeaders });
    const body = await upstreamJson(answer, DEFAULT_MAX_UPSTREAM_BYTES, geminiError);
    const embeddings = Array.isArray(body.embeddings) ? body.embeddings : [];
    const vectors = embeddings.map((embedding) => {
      const values = (embedding as { values?: unknown }).values;
      if (!Array.isArray(values)) throw new Error('Gemini answered an embedding without values');
      return Float32Array.from(values as number[]);
    });
    const chars = texts.reduce((sum, text) => sum + text.length, 0);
    return { vectors, inputTokens: Math.ceil(chars / CHARS_PER_TOKEN) };
  };
}
