import { Readable } from 'node:stream';
import type { TokenUsage } from '../../../usage/token-usage.js';
import { tokenCount, type AnswerFormat } from '../../answer.js';
import { isObject, type JsonObject } from '../../content.js';
import { UpstreamStatusError, type EmbedAnswer, type Provider, type ProviderAnswer, type ProviderRequest } from '../../provider.js';
import { DEFAULT_MAX_UPSTREAM_BYTES, providerAnswer, readWhole, UPSTREAM_CALL, type CallRequest } from '../../upstream-call.js';
import { statusAnswer } from '../neutral-call.js';
import { withBody } from '../translate.js';
import { embeddingInputs } from './request.js';

/** Embeddings' `usage`, read: `prompt_tokens`, the input; nothing is generated. */
export function readEmbeddingsUsage(usage: unknown): TokenUsage {
  return { inputTokens: isObject(usage) ? tokenCount(usage.prompt_tokens) : 0, outputTokens: 0 };
}

/** Embeddings answers: `usage.prompt_tokens` and `model` in a JSON answer; they never stream. */
export const embeddingsAnswer: AnswerFormat = {
  json(answer, model) {
    answer.model = model;
    return readEmbeddingsUsage(answer.usage);
  },
  // Refused by the body check before anything is sent: no stream ever reaches a reader.
  stream: () => ({ event: (event) => event, usage: { inputTokens: 0, outputTokens: 0 } }),
};

/** A vector as OpenAI's `base64` encoding gives it: its float32 values, little-endian. */
export function base64Vector(vector: Float32Array): string {
  const bytes = Buffer.allocUnsafe(vector.length * 4);
  for (let at = 0; at < vector.length; at++) bytes.writeFloatLE(vector[at] as number, at * 4);
  return bytes.toString('base64');
}

const JSON_HEADERS = { 'content-type': 'application/json' };
const jsonAnswer = (body: JsonObject): ProviderAnswer => ({ statusCode: 200, headers: JSON_HEADERS, body: Readable.from([JSON.stringify(body)]) });

/** `items` in runs of at most `size`, in order. */
function runs<T>(items: readonly T[], size: number): T[][] {
  const all: T[][] = [];
  for (let at = 0; at < items.length; at += size) all.push(items.slice(at, at + size));
  return all;
}

/**
 * How an embeddings call reaches `provider`, or undefined when it has no embeddings: natively,
 * the body passed through as it is, when the provider speaks OpenAI's API and the inputs fit its
 * `embeddingInputsPerCall`; else in runs of that many (OpenAI's answers joined, or the neutral
 * `embed()`'s vectors written as OpenAI's answer, floats or base64 as the client asked), the
 * answers joined in order and their usage summed. The first refusal or failure of a run is the call's.
 */
export function embeddingsSender(provider: Provider): ((request: ProviderRequest) => Promise<ProviderAnswer | Response>) | undefined {
  const perCall = provider.embeddingInputsPerCall ?? Infinity;
  const native = provider.embeddings?.bind(provider);
  const embed = provider.embed?.bind(provider);
  if (native !== undefined) {
    return async (request) => {
      const inputs = embeddingInputs(request.body.input);
      return inputs.length <= perCall ? native(request) : joinAnswers(native, request, runs(inputs, perCall));
    };
  }
  if (embed === undefined) return undefined;
  return async (request) => {
    const { body, signal, traceHeaders } = request;
    const dimensions = body.dimensions as number | undefined;
    const answers: EmbedAnswer[] = [];
    for (const inputs of runs(embeddingInputs(body.input), perCall)) {
      // A client gone, or an upstream too slow, stops the runs left.
      signal.throwIfAborted();
      let answer: EmbedAnswer;
      try {
        answer = await embed({ model: body.model as string, inputs, dimensions, signal, traceHeaders });
      } catch (err) {
        // An upstream's HTTP error is answered as an OpenAI upstream's would be: refused, or 502 and retried.
        if (err instanceof UpstreamStatusError) return statusAnswer(err);
        throw err;
      }
      if (answer.vectors.length !== inputs.length)
        throw new Error(`the provider's embed() answered ${answer.vectors.length} vectors for ${inputs.length} inputs`);
      answers.push(answer);
    }
    const base64 = body.encoding_format === 'base64';
    const tokens = answers.reduce((sum, answer) => sum + answer.inputTokens, 0);
    return jsonAnswer({
      object: 'list',
      data: answers
        .flatMap((answer) => answer.vectors)
        .map((vector, index) => ({ object: 'embedding', index, embedding: base64 ? base64Vector(vector) : Array.from(vector) })),
      model: body.model,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    });
  };
}

/** One OpenAI call per run of inputs, in order, their answers joined as one. */
async function joinAnswers(
  send: (request: ProviderRequest) => Promise<ProviderAnswer | Response>,
  request: ProviderRequest,
  inputRuns: unknown[][],
): Promise<ProviderAnswer> {
  const call = (request as Partial<CallRequest>)[UPSTREAM_CALL];
  const data: unknown[] = [];
  const usage: TokenUsage = { inputTokens: 0, outputTokens: 0 };
  let model: unknown = request.body.model;
  for (const input of inputRuns) {
    // A client gone, or an upstream too slow, stops the runs left.
    request.signal.throwIfAborted();
    const answer = providerAnswer(await send(withBody(request, { ...request.body, input })));
    // A refusal or a failure is answered as a native call's is.
    if (answer.statusCode < 200 || answer.statusCode > 299) return answer;
    const text = await readWhole(answer.body, call?.maxBytes ?? DEFAULT_MAX_UPSTREAM_BYTES, call);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      // Passed on as it is, to be refused as malformed.
      return { ...answer, body: Readable.from([text]) };
    }
    if (!isObject(json) || !Array.isArray(json.data)) return { ...answer, body: Readable.from([text]) };
    const offset = data.length;
    for (const item of json.data) data.push(isObject(item) ? { ...item, index: offset + tokenCount(item.index) } : item);
    usage.inputTokens += embeddingsAnswer.json(json, '').inputTokens;
    model = json.model ?? model;
  }
  return jsonAnswer({ object: 'list', data, model, usage: { prompt_tokens: usage.inputTokens, total_tokens: usage.inputTokens } });
}
