import type { Context, Next } from 'koa';

/**
 * Runs the rest of the chain, then `done` once both the chain has returned (or thrown) and the
 * response has closed (its last byte sent, or the client gone), whichever comes last: a JSON body
 * is written after the chain returns, a stream before, and a client that leaves mid-stream closes
 * the response while the chain is still winding down. `done` runs once; what it throws is
 * reported on `app.on('error')`, never thrown from an event listener.
 * @example return async function meter(ctx, next) { await afterResponse(ctx, next, () => observe(ctx)) }
 */
export async function afterResponse(ctx: Context, next: Next, done: () => void): Promise<void> {
  const { res } = ctx;
  let returned = false;
  let closed = false;
  const finish = () => {
    try {
      done();
    } catch (err) {
      ctx.app.emit('error', err, ctx);
    }
  };
  const onClose = () => {
    closed = true;
    if (returned) finish();
  };
  res.once('close', onClose);
  try {
    await next();
  } finally {
    returned = true;
    // Closed before this listener was added: it will not fire.
    if (!closed && res.closed) {
      res.off('close', onClose);
      closed = true;
    }
    if (closed) finish();
  }
}
