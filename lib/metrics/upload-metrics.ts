import type { Middleware } from 'koa';
import { GatewayError } from '../errors/gateway-error.js';
import type { GatewayMetrics, LimitKind } from './gateway-metrics.js';

export interface UploadMetricsOptions {
  metrics: Pick<GatewayMetrics, 'uploaded' | 'limitRefused'>;
}

// The file limits' 429s, by the code the files router refuses with.
const FILE_LIMITS: Readonly<Record<string, LimitKind>> = {
  rate_limit_exceeded: 'file_creations',
  ingestion_quota_exceeded: 'file_ingestion',
  storage_quota_exceeded: 'file_storage',
};

/**
 * Feeds `kmg_uploaded_bytes_total` (the bytes of each file an upload created) and the file limits'
 * `kmg_limit_refusals_total`, from outside the files router: an upload is a request on which
 * `pdfUpload()` set `ctx.state.upload`, created when the chain returns, refused by a limit when it
 * throws a 429. Put it after the error formatter (it must see the errors thrown) and before
 * `filesRouter()`; other requests pass untouched.
 * @example app.use(gatewayErrors()).use(uploadMetrics({ metrics })).use(files.routes())
 */
export function uploadMetrics(options: UploadMetricsOptions): Middleware {
  const { metrics } = options;
  if (typeof metrics?.uploaded !== 'function') throw new TypeError('koa-model-gateway: uploadMetrics() needs `metrics` from createGatewayMetrics()');
  return async function uploadMetrics(ctx, next) {
    try {
      await next();
    } catch (err) {
      const kind = ctx.state.upload && err instanceof GatewayError && err.status === 429 ? FILE_LIMITS[err.code] : undefined;
      if (kind !== undefined) metrics.limitRefused(kind);
      throw err;
    }
    if (ctx.state.upload && ctx.status === 200) metrics.uploaded(ctx.state.upload.bytes);
  };
}
