import type { Middleware } from 'koa';
import type { Logger } from 'pino';

/**
 * One log line per request, written when the response is finished or the client has gone:
 * request id, key id and account (never the key), method, route, path, status (499 when the
 * client left first) and duration, and the model and provider of a model request.
 * Put it first, so that the status is the one the error formatters wrote.
 * @example app.use(requestLog(logger))
 */
export function requestLog(logger: Logger): Middleware {
  return async function requestLog(ctx, next) {
    const started = process.hrtime.bigint();
    const write = () => {
      const key = ctx.state.apiKey;
      const model = ctx.state.modelRequest;
      const route = (ctx as { _matchedRoute?: unknown })._matchedRoute;
      logger.info(
        {
          requestId: ctx.state.requestId ?? null,
          keyId: key?.id ?? null,
          account: key?.account ?? null,
          method: ctx.method,
          route: typeof route === 'string' ? route : null,
          path: ctx.path,
          // nginx's 499: the client closed the request before its answer was complete.
          status: ctx.res.writableFinished ? ctx.res.statusCode : 499,
          ...(model ? { model: model.model, provider: model.provider, stream: model.stream } : {}),
          durationMs: Math.round(Number(process.hrtime.bigint() - started) / 1e4) / 100,
          ...(ctx.res.writableFinished ? {} : { aborted: true }),
        },
        'request',
      );
    };
    try {
      await next();
    } finally {
      // Bodies are streamed after the middleware returns: log when the response is really over.
      if (ctx.res.closed) write();
      else ctx.res.once('close', write);
    }
  };
}
