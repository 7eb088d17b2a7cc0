import type { Context } from 'koa';

/** How long a refused request's connection is still read from, its bytes discarded, after the answer. */
const LINGER_MS = 5000;

/**
 * Closes the connection after this response, lingering as nginx's `lingering_close` does: the
 * answer and a FIN go out, and what the client is still sending is read and discarded until its
 * body ends or `LINGER_MS` passes; only then is the socket closed. Node alone would close at once
 * (`destroySoon()` after a `Connection: close` answer), and closing a socket that still has unread
 * bytes resets the connection: a client busy writing its body (undici, node:http) then sees the
 * reset before it reads the answer. The socket is never left paused.
 * @example lingeringClose(ctx); throw errors.fileTooLarge()
 */
export function lingeringClose(ctx: Context): void {
  const { req, res } = ctx;
  const socket = req.socket;
  res.shouldKeepAlive = false;
  const closeWhenFlushed = socket.destroySoon.bind(socket);
  socket.destroySoon = function lingeringDestroySoon() {
    if (req.complete) {
      closeWhenFlushed();
      return;
    }
    socket.end();
    const timer = setTimeout(closeWhenFlushed, LINGER_MS).unref();
    req.once('end', () => {
      clearTimeout(timer);
      closeWhenFlushed();
    });
  };
  req.resume();
}
