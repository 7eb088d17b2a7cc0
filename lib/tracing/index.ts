export { traceRequests, type TraceRequestsOptions } from './trace-requests.js';
export { tracedStore, type TracedStoreOptions } from './traced-store.js';
