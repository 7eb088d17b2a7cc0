import { createServer, STATUS_CODES, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { errors, GatewayError } from 'koa-model-gateway/errors';
import { LINGER_MS } from '../lib/errors/lingering-close.js';
import { newRequestId } from '../lib/errors/request-id.js';
import { shapeABody } from '../lib/errors/openai-errors.js';
import { SECURITY_HEADERS } from './security-headers.js';

/** What Node's parser refuses (its error codes), as decisions.md's rows. */
function protocolError(code: string | undefined): GatewayError {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return new GatewayError(431, 'invalid_request_error', 'request_headers_too_large', 'Request headers are too large');
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return errors.requestTooLarge();
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new GatewayError(408, 'invalid_request_error', 'request_timeout', 'The request was not received in time');
    default:
      return errors.invalidRequest('Malformed HTTP request');
  }
}

/** A whole HTTP/1.1 response in Shape A, closing the connection. */
function shapeAResponse(err: GatewayError, requestId: string): string {
  const body = JSON.stringify(shapeABody(err));
  const headers = [
    ['Content-Type', 'application/json; charset=utf-8'],
    ['Content-Length', String(Buffer.byteLength(body))],
    ['X-Request-Id', requestId],
    ...SECURITY_HEADERS,
    ['Connection', 'close'],
  ];
  return `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status]}\r\n${headers.map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n${body}`;
}

/**
 * The reference server's HTTP server around `listener`. What never reaches the app is answered in
 * Shape A with an `X-Request-Id` too, and logged with it: a request Node's parser refuses
 * (malformed framing, headers over 16 KiB, a request timeout), for which Node alone sends a
 * bodiless 400 or 431, and CONNECT, which Node closes unanswered. The answer is followed by a FIN;
 * what the client still sends is read and dropped for up to `LINGER_MS`, so that it reads the
 * answer rather than a reset.
 * @example createHttpServer(app.callback(), logger).listen(8080)
 */
export function createHttpServer(listener: RequestListener, logger: Logger): Server {
  const server = createServer(listener);
  // The exchange under way on each connection: a protocol error must not break into its answer.
  const exchanges = new WeakMap<Duplex, { req: IncomingMessage; res: ServerResponse }>();
  // Node's parser reports its error again for every further chunk.
  const answered = new WeakSet<Duplex>();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => exchanges.set(req.socket, { req, res }));

  /** The answer, logged with its request id. */
  const response = (err: GatewayError, cause: string) => {
    const requestId = newRequestId();
    logger.info({ requestId, status: err.status, cause }, 'protocol error');
    return shapeAResponse(err, requestId);
  };
  const send = (socket: Duplex, err: GatewayError, cause: string) => {
    if (!socket.writable) return void socket.destroy();
    socket.end(response(err, cause));
    const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref();
    socket.once('close', () => clearTimeout(timer));
  };
  const answer = (socket: Duplex, err: GatewayError, cause: string) => {
    answered.add(socket);
    const exchange = exchanges.get(socket);
    if (exchange === undefined || exchange.res.writableFinished) return send(socket, err, cause);
    const { req, res } = exchange;
    if (req.complete) {
      // The error is in a request pipelined behind it: its answer comes first.
      res.once('close', () => (res.writableFinished ? send(socket, err, cause) : socket.destroy()));
      return;
    }
    // The error is in its body, which can never end now: its handler learns it from the close.
    if (!res.headersSent) socket.write(response(err, cause));
    socket.destroy();
  };

  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (answered.has(socket)) return;
    if (err.code === 'ECONNRESET') return void socket.destroy();
    answer(socket, protocolError(err.code), err.code ?? 'unknown');
  });
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    // Node hands the socket over as it is: nothing reads from it or handles its errors.
    socket.on('error', () => undefined).resume();
    answer(socket, errors.invalidRequest('CONNECT is not supported: this server is no proxy'), 'CONNECT');
  });
  return server;
}
