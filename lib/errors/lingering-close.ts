import type { Context } from 'koa';

/**
 * How long a connection is still read from, its bytes dropped, after an answer that came before
 * the body's end.
 * @example setTimeout(() => socket.destroy(), LINGER_MS).unref()
 */
export const LINGER_MS = 5000;

/**
 * For an answer given before the request body has arrived whole (a refused upload, a declared
 * length over the limit): sends it at once with `Connection: close`, then goes on reading the body,
 * dropping it, and ends the response only when the body has ended or `LINGER_MS` passed, as nginx's
 * `lingering_close` does. Node closes the socket as soon as such a response ends, and closing a
 * socket with unread bytes resets the connection: a client still writing its body (curl, undici,
 * node:http) would see the reset before it reads the answer. Only public APIs: the response is
 * written here (`ctx.respond = false`), its end held back.
 * Call it once status, headers and body are set; it does nothing when the body is already in.
 * @example ctx.status = 413; ctx.body = { error }; lingeringClose(ctx)
 */
export function lingeringClose(ctx: Context): void {
  const { req, res, response } = ctx;
  if (req.complete) return;
  const { body } = response;
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  response.set('Connection', 'close');
  response.length = bytes.length;
  ctx.respond = false;
  res.write(bytes);
  const end = () => {
    clearTimeout(timer);
    if (!res.writableEnded && !res.destroyed) res.end();
  };
  const timer = setTimeout(end, LINGER_MS).unref();
  req.once('end', end).once('close', end);
  req.resume();
}
