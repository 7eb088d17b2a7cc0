import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Body bytes the client had written when the response began. */
  bytesSent: number;
}

export interface RawRequest {
  method?: string;
  headers?: Record<string, string>;
  /**
   * The body: a buffer (sent with Content-Length unless `chunked`), or chunks produced on demand,
   * which stop as soon as the response is in (an endless generator proves the server answered
   * without waiting for the end of the body).
   */
  body?: Buffer | Iterable<Buffer>;
  /** Send a buffer body with Transfer-Encoding: chunked instead of Content-Length. */
  chunked?: boolean;
  /** Abort the request once this many body bytes are written. */
  abortAfter?: number;
}

const CHUNK = 64 * 1024;

function* slices(buffer: Buffer): Iterable<Buffer> {
  for (let offset = 0; offset < buffer.length; offset += CHUNK) yield buffer.subarray(offset, offset + CHUNK);
}

/**
 * One request on a fresh connection with node:http, so tests choose between Content-Length and
 * chunked, keep writing while the server answers, or abort mid-body. Resolves with the response
 * (or rejects on a socket error before any response).
 */
export function rawRequest(url: string, options: RawRequest = {}): Promise<RawResponse> {
  const { body, chunked = false } = options;
  const headers: Record<string, string> = { ...options.headers };
  if (Buffer.isBuffer(body) && !chunked) headers['content-length'] = String(body.length);
  return new Promise((resolve, reject) => {
    let bytesSent = 0;
    let answered = false;
    const req = httpRequest(url, { method: options.method ?? 'POST', headers, agent: false });
    req.on('response', (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), bytesSent });
        req.destroy();
      });
      res.on('error', reject);
    });
    // A server that answers early and closes makes the remaining writes fail: only an error
    // before the answer is one.
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    if (body === undefined) {
      req.end();
      return;
    }
    const source = (Buffer.isBuffer(body) ? slices(body) : body)[Symbol.iterator]();
    const pump = () => {
      while (!answered && !req.destroyed) {
        if (options.abortAfter !== undefined && bytesSent >= options.abortAfter) {
          req.destroy();
          reject(new Error('aborted by the test'));
          return;
        }
        const next = source.next();
        if (next.done) {
          req.end();
          return;
        }
        bytesSent += next.value.length;
        if (!req.write(next.value)) {
          req.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
}

export interface RawExchange {
  /** Everything the server sent, as latin1 text. */
  answer: string;
  /** True when the connection ended with an error (a reset) rather than cleanly. */
  reset: boolean;
}

/**
 * Writes `head` (a request line and headers, blank line included) and every chunk of `body` on a
 * raw socket before reading anything, as curl does with a file, then collects the answer until
 * the server closes (the socket closes its side when the server does; it never half-closes
 * first, which Node answers by closing at once). A server that stops reading blocks the writes;
 * one that closes with unread bytes resets the connection. With `abort`, the client drops the
 * connection once it has written everything, as a client that gives up does.
 */
export function rawExchange(url: string, head: string, body: Iterable<Buffer | string>, options: { abort?: boolean } = {}): Promise<RawExchange> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let answer = '';
  socket.on('data', (data: Buffer) => (answer += data.toString('latin1')));
  socket.on('error', () => undefined); // seen as close's hadError
  const closed = new Promise<RawExchange>((resolve) => socket.once('close', (reset) => resolve({ answer, reset })));
  socket.write(head);
  for (const chunk of body) socket.write(chunk);
  if (options.abort === true) socket.destroy();
  return closed;
}
