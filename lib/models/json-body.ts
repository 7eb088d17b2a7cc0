import type { IncomingMessage } from 'node:http';
import { errors } from '../errors/gateway-error.js';
import { isObject, type JsonObject } from './content.js';

/**
 * Reads the request body as one JSON object, whatever its Content-Type (curl's `-d` sends a form
 * type), refusing more than `limit` bytes with 413. Over the limit it stops listening and lets
 * the rest drain, rather than destroying the socket, so the client still gets the 413.
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
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    throw errors.invalidJson();
  }
  if (!isObject(body)) throw errors.invalidRequest('Request body must be a JSON object');
  return body;
}
