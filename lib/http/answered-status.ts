import type { ServerResponse } from 'node:http';

/**
 * The status a request is logged, measured and recorded under once its response has closed: the
 * one it was answered with, or nginx's 499 ("client closed request") when the connection closed
 * before the answer ended, a client that left mid-stream included, whatever status its headers had.
 * @example afterResponse(ctx, next, () => observe({ status: answeredStatus(ctx.res) }))
 */
export function answeredStatus(res: ServerResponse): number {
  return res.writableFinished ? res.statusCode : 499;
}
