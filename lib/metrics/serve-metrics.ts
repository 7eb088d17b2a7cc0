import type { Middleware } from 'koa';
import type { GatewayMetrics } from './gateway-metrics.js';

export interface ServeMetricsOptions {
  metrics: GatewayMetrics;
  /** Default `/metrics`. */
  path?: string;
}

/**
 * Answers `GET /metrics` with the metrics in Prometheus' text format; other paths fall through
 * (Koa's 404), other methods get 405. Meant for a listener of its own, on a port that only the
 * scraper reaches: it asks for no key.
 * @example new Koa().use(serveMetrics({ metrics })).listen(Number(process.env.METRICS_PORT), process.env.HOST)
 */
export function serveMetrics(options: ServeMetricsOptions): Middleware {
  const { metrics, path = '/metrics' } = options;
  if (typeof metrics?.registry?.metrics !== 'function') throw new TypeError('koa-model-gateway: serveMetrics() needs `metrics` from createGatewayMetrics()');
  if (typeof path !== 'string' || !path.startsWith('/')) throw new TypeError("koa-model-gateway: serveMetrics() path must start with '/'");
  return async function serveMetrics(ctx, next) {
    if (ctx.path !== path) return next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      ctx.status = 405;
      ctx.set('Allow', 'GET, HEAD');
      return;
    }
    ctx.type = metrics.registry.contentType;
    ctx.body = await metrics.registry.metrics();
  };
}
