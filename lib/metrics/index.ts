export {
  createGatewayMetrics,
  type GatewayMetrics,
  type LimitKind,
  type ObservedModelCall,
  type ObservedRequest,
} from './gateway-metrics.js';
export { httpMetrics, type HttpMetricsOptions } from './http-metrics.js';
export { serveMetrics, type ServeMetricsOptions } from './serve-metrics.js';
export { uploadMetrics, type UploadMetricsOptions } from './upload-metrics.js';
