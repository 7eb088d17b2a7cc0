/**
 * `koa-model-gateway/metrics`: Prometheus metrics (prom-client, an optional peer, which only this
 * entry point loads): `createGatewayMetrics()` and the middleware that feed and serve them.
 */
export {
  createGatewayMetrics,
  type GatewayMetrics,
  type LimitKind,
  type ObservedModelCall,
  type ObservedToolCall,
  type ObservedRequest,
} from './gateway-metrics.js';
export { httpMetrics, type HttpMetricsOptions } from './http-metrics.js';
export { serveMetrics, type ServeMetricsOptions } from './serve-metrics.js';
export { uploadMetrics, type UploadMetricsOptions } from './upload-metrics.js';
