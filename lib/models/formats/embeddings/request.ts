import { errors } from '../../../errors/gateway-error.js';
import type { JsonObject } from '../../content.js';

/** The most inputs one call may send: OpenAI's own limit. */
export const MAX_EMBEDDING_INPUTS = 2048;

const ENCODINGS = ['float', 'base64'];

const isTokenId = (value: unknown) => Number.isSafeInteger(value) && (value as number) >= 0;
const isTokenArray = (value: unknown): value is number[] => Array.isArray(value) && value.length > 0 && value.every(isTokenId);

/**
 * The inputs of an embeddings body, in order, each a text or an array of token ids; a 400 naming
 * `input` when it is none of OpenAI's four shapes (a string, an array of strings, an array of
 * token ids, an array of token arrays), empty, or longer than `MAX_EMBEDDING_INPUTS`.
 */
export function embeddingInputs(input: unknown): Array<string | number[]> {
  if (typeof input === 'string' && input !== '') return [input];
  if (isTokenArray(input)) return [input];
  const shape = "'input' must be a non-empty string, an array of non-empty strings, an array of token ids or an array of token arrays";
  if (!Array.isArray(input) || input.length === 0) throw errors.invalidRequest(shape);
  if (input.length > MAX_EMBEDDING_INPUTS) throw errors.invalidRequest(`'input' may hold at most ${MAX_EMBEDDING_INPUTS} items`);
  const strings = input.every((item) => typeof item === 'string' && item !== '');
  if (!strings && !input.every(isTokenArray)) throw errors.invalidRequest(shape);
  return input as Array<string | number[]>;
}

/** Refuses (400, by name) an embeddings body OpenAI would refuse, before anything is sent or counted. */
export function checkEmbeddingsBody(body: JsonObject): void {
  embeddingInputs(body.input);
  if (body.encoding_format !== undefined && !ENCODINGS.includes(body.encoding_format as string)) {
    throw errors.invalidRequest("'encoding_format' must be 'float' or 'base64'");
  }
  if (body.dimensions !== undefined && !(Number.isSafeInteger(body.dimensions) && (body.dimensions as number) >= 1)) {
    throw errors.invalidRequest("'dimensions' must be a positive integer");
  }
  if (body.user !== undefined && typeof body.user !== 'string') throw errors.invalidRequest("'user' must be a string");
  // OpenAI's embeddings never stream: a streamed answer is not one the client could read.
  if (body.stream !== undefined && body.stream !== false) throw errors.invalidRequest("'stream' is not supported on /v1/embeddings");
}
