import type { ServerResponse } from 'node:http';
import type { Context, Next } from 'koa';

/**
 * What waits for each response's 'close': one listener per response however many wait, so that a
 * chain of tracing, metrics, metering and a request log adds one, and a streamed body (whose
 * pipeline adds seven of its own) stays under EventEmitter's warning at ten.
 */
const waiting = new WeakMap<ServerResponse, Set<() => void>>();

/** Calls `callback` when `res` closes; the function returned stops waiting. */
function whenClosed(res: ServerResponse, callback: () => void): () => void {
  let callbacks = waiting.get(res);
  if (callbacks === undefined) {
    const all = new Set<() => void>();
    waiting.set(res, all);
    res.once('close', () => {
      waiting.delete(res);
      for (const each of all) each();
    });
    callbacks = all;
  }
  const mine = callbacks.add(callback);
  return () => {
    mine.delete(callback);
  };
}

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
  const stopWaiting = whenClosed(res, onClose);
  try {
    await next();
  } finally {
    returned = true;
    // Closed before this listener was added: it will not fire.
    if (!closed && res.closed) {
      stopWaiting();
      closed = true;
    }
    if (closed) finish();
  }
}
