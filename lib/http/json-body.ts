import type { IncomingMessage } from 'node:http';
import { errors } from '../errors/gateway-error.js';

/** A JSON object of a request or answer body. */
export type JsonObject = Record<string, unknown>;

export const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Arrays and objects nested deeper than this are refused (400). Real requests stay far below it
 * (JSON schemas of tools included), and everything that walks or re-serializes a body (the file
 * references, `JSON.stringify` for the upstream) recurses: a deeper body would overflow the stack.
 */
const MAX_DEPTH = 128;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Where the string that opens at `start` ends: at the next quote that no backslash escapes. */
function endOfString(text: string, start: number): number {
  for (let at = text.indexOf('"', start + 1); ; at = text.indexOf('"', at + 1)) {
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes += 1;
    if (backslashes % 2 === 0) return at;
  }
}

/** True when `json` (already parsed, so valid) nests arrays and objects deeper than `max`. */
function nestsDeeperThan(json: string, max: number): boolean {
  let depth = 0;
  for (let at = 0; at < json.length; at++) {
    const char = json.charCodeAt(at);
    if (char === QUOTE) at = endOfString(json, at);
    else if (char === 0x5b || char === 0x7b) depth += 1; // [ {
    else if (char === 0x5d || char === 0x7d) depth -= 1; // ] }
    if (depth > max) return true;
  }
  return false;
}

/**
 * Reads the request body as one JSON object, whatever its Content-Type (curl's `-d` sends a form
 * type), refusing more than `limit` bytes with 413 and more than 128 levels of nesting with 400.
 * Over the limit, declared or found, it stops listening, never destroying the socket: the
 * formatter answers at once and closes the connection once the rest has drained
 * (`lingeringClose`), so a client still writing gets its 413 rather than a reset.
 */
export async function readJsonBody(req: IncomingMessage, limit: number): Promise<JsonObject> {
  if (req.readableEnded) throw new Error('koa-model-gateway: the request body was already read; mount no body parser before the model handlers');
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw errors.requestTooLarge();
  const raw = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      req.off('data', onData).off('end', onEnd).off('error', onBroken).off('close', onBroken);
      // Flowing without a listener: the rest is read and dropped.
      req.resume();
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      stop();
      reject(errors.requestTooLarge());
    };
    const onEnd = () => {
      stop();
      resolve(Buffer.concat(chunks));
    };
    const onBroken = () => {
      stop();
      reject(errors.invalidRequest('The request body was not received completely'));
    };
    req.on('data', onData).on('end', onEnd).on('error', onBroken).on('close', onBroken);
  });
  const text = raw.toString('utf8');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw errors.invalidJson();
  }
  if (!isObject(body)) throw errors.invalidRequest('Request body must be a JSON object');
  if (nestsDeeperThan(text, MAX_DEPTH)) {
    throw errors.invalidRequest(`Request body must not nest arrays and objects more than ${MAX_DEPTH} levels deep`);
  }
  return body;
}
