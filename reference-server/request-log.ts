import { performance } from 'node:perf_hooks';
import type { RouterContext } from '@koa/router';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { withoutSecrets } from 'koa-model-gateway/auth';
import { afterResponse } from '../lib/http/after-response.js';

/**
 * One log line per request, written when the response is finished or the client has gone:
 * request id, key id and account (never the key, nor one a client put in the path), method,
 * route, path, status (499 when the client left first) and duration, the model and provider of a
 * model request, and the trace id when the request is traced (`traceRequests()`, with tracing on).
 * A field with no value (no key, no route, no trace) is left out. At debug, a translated call's
 * omitted fields (`x-kmg-omitted`) have a line of their own.
 * Put it first, so that the status is the one the error formatters wrote.
 * @example app.use(requestLog(logger))
 */
export function requestLog(logger: Logger): Middleware {
  return async function requestLog(ctx, next) {
    const started = performance.now();
    const write = () => {
      const { request, res, state } = ctx;
      const key = state.apiKey;
      const model = state.modelRequest;
      // @koa/router's documented `ctx.routerPath`: the path pattern of the route that ran.
      const route = (ctx as Partial<RouterContext>).routerPath;
      const finished = res.writableFinished;
      // `undefined`, not `null`, for what is absent: pino skips it, where it serialises a null.
      // What translation left out, for whoever looks into why an answer differs from a native one's.
      if (model?.omitted) logger.debug({ requestId: state.requestId, model: model.model, omitted: model.omitted }, 'translation omitted');
      logger.info(
        {
          requestId: state.requestId,
          traceId: state.tracing?.traceId || undefined,
          keyId: key?.id,
          account: key?.account,
          method: request.method,
          route,
          // A key a client put in its path is not logged.
          path: withoutSecrets(request.path),
          // nginx's 499: the client closed the request before its answer was complete.
          status: finished ? res.statusCode : 499,
          durationMs: Math.round((performance.now() - started) * 100) / 100,
          model: model?.model,
          provider: model?.provider,
          stream: model?.stream,
          aborted: finished ? undefined : true,
        },
        'request',
      );
    };
    // Bodies are streamed after the middleware returns: log when the response is really over.
    await afterResponse(ctx, next, write);
  };
}
