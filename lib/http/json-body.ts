import type { IncomingMessage } from 'node:http';
import { errors } from '../errors/gateway-error.js';

/** A JSON object of a request or answer body. */
export type JsonObject = Record<string, unknown>;

export const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Arrays and objects nested deeper than this are refused (400). Real requests stay far below it
 * (JSON schemas of tools included), and everything that walks or re-serializes a body (the file
 * references, `JSON.stringify` for the upstream) recurses: a deeper body would overflow the stack.
 */
const MAX_DEPTH = 128;

/**
 * True when `value` (parsed JSON) nests arrays and objects more than `levels` deep, itself
 * included. It walks the values, not the text: a long prompt is one string, whatever its length.
 * The walk stops at `levels`, so it recurses no deeper than that however deep the value.
 */
function nestsDeeperThan(value: unknown, levels: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (levels === 0) return true;
  if (Array.isArray(value)) {
    for (const item of value as unknown[]) if (nestsDeeperThan(item, levels - 1)) return true;
    return false;
  }
  for (const key in value) if (nestsDeeperThan((value as JsonObject)[key], levels - 1)) return true;
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
  const body = await readJsonValue(req, limit);
  if (!isObject(body)) throw errors.invalidRequest('Request body must be a JSON object');
  return body;
}

/**
 * `readJsonBody()` for a body that may be any JSON value (a JSON-RPC batch is an array): the same
 * bounds, in bytes and nesting.
 */
export async function readJsonValue(req: IncomingMessage, limit: number): Promise<unknown> {
  const text = (await readBody(req, limit)).toString('utf8');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw errors.invalidJson();
  }
  if (nestsDeeperThan(body, MAX_DEPTH)) {
    throw errors.invalidRequest(`Request body must not nest arrays and objects more than ${MAX_DEPTH} levels deep`);
  }
  return body;
}

/**
 * The request body's bytes, more than `limit` refused with 413 (declared or found); over it, the
 * rest is read and dropped, never destroying the socket.
 */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  if (req.readableEnded) throw new Error('koa-model-gateway: the request body was already read; mount no body parser before the model handlers');
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw errors.requestTooLarge();
  return new Promise<Buffer>((resolve, reject) => {
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
}
