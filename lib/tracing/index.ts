/**
 * `koa-model-gateway/tracing`: OpenTelemetry traces (`@opentelemetry/api`, an optional peer, which
 * only this entry point loads): a span per request and per upstream attempt, and stores traced from
 * outside.
 */
export { traceRequests, type TraceRequestsOptions } from './trace-requests.js';
export { tracedStore, type TracedStoreOptions } from './traced-store.js';
