import { performance } from 'node:perf_hooks';
import type { RouterContext } from '@koa/router';
import type { Context, Middleware } from 'koa';
import { afterResponse } from '../http/after-response.js';
import { answeredStatus } from '../http/answered-status.js';
import type { ModelRequestState } from '../state.js';
import type { GatewayMetrics } from './gateway-metrics.js';

export interface HttpMetricsOptions {
  metrics: GatewayMetrics;
  /**
   * The `route` label of a request: a bounded name, never the raw path. Default: the method and
   * the pattern of the @koa/router route that answered (`GET /v1/files/:file_id`), read from its
   * public `ctx.routerPath`; `'unmatched'` for every request no route answered (unknown URLs,
   * wrong methods, and requests refused before the routers, such as a missing key).
   */
  route?: (ctx: Context) => string;
  /**
   * How long this request waited on an upstream provider, in ms, for `kmg_gateway_overhead_seconds`.
   * Read when the response has ended. Default: the `upstreamMs` the model endpoints put on
   * `ctx.state.modelRequest` (none for other requests: the whole time is the gateway's).
   */
  upstreamMs?: (ctx: Context) => number | undefined;
}

// A type, not a module, from lib/models: koa-model-gateway/metrics loads nothing of it.
const modelUpstreamMs = (ctx: Context) => (ctx.state.modelRequest as ModelRequestState | undefined)?.upstreamMs ?? undefined;

function matchedRoute(ctx: Context): string {
  const pattern = (ctx as Partial<RouterContext>).routerPath;
  return typeof pattern === 'string' ? `${ctx.method} ${pattern}` : 'unmatched';
}

/**
 * Records `kmg_http_requests_total`, `kmg_http_request_duration_seconds` and
 * `kmg_gateway_overhead_seconds` for every request, when its response has ended (the last byte of
 * a stream sent, or the client gone) and the chain has returned, with the status it was answered
 * with (`answeredStatus()`: 499 when the connection closed before the answer ended). Put it first
 * in the chain, before the error formatters, so that it sees their answers too.
 * @example app.use(httpMetrics({ metrics }))
 */
export function httpMetrics(options: HttpMetricsOptions): Middleware {
  const { metrics, route = matchedRoute, upstreamMs = modelUpstreamMs } = options;
  if (typeof metrics?.observeRequest !== 'function') throw new TypeError('koa-model-gateway: httpMetrics() needs `metrics` from createGatewayMetrics()');
  if (typeof route !== 'function' || typeof upstreamMs !== 'function') {
    throw new TypeError('koa-model-gateway: httpMetrics() route and upstreamMs must be functions');
  }
  return async function httpMetrics(ctx, next) {
    const started = performance.now();
    await afterResponse(ctx, next, () => {
      const seconds = (performance.now() - started) / 1000;
      metrics.observeRequest({ route: route(ctx), status: answeredStatus(ctx.res), seconds, upstreamSeconds: (upstreamMs(ctx) ?? 0) / 1000 });
    });
  };
}
