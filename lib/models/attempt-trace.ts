import type { JsonObject } from './content.js';
import type { Provider, ProviderAnswer, ProviderEndpoint } from './provider.js';

/** One upstream attempt as a tracer is told of it when it starts. */
export interface AttemptStart {
  /** The provider method called: the format of the request and of its answer. */
  endpoint: ProviderEndpoint;
  provider: Provider;
  /** The catalog id the client asked for. */
  model: string;
  /** The body sent upstream (`model` the upstream's name). */
  body: JsonObject;
  stream: boolean;
}

/**
 * The trace of one upstream attempt, told by `UpstreamCall` what happens to it. Its methods cost
 * nothing measurable when the attempt is not sampled.
 */
export interface AttemptTrace {
  /** The W3C trace context (`traceparent`, `tracestate`) to send upstream; empty when there is none. */
  readonly headers: Readonly<Record<string, string>>;
  /** The upstream's status and headers arrived. */
  answered(answer: ProviderAnswer): void;
  /** A chunk of the upstream's answer body. */
  chunk(chunk: Buffer | string): void;
  /** The attempt failed: `errorType` is a low-cardinality class (`timeout`, a status code, an error code). Only the first counts. */
  failed(errorType: string): void;
  /** The upstream's part is over: called once. */
  end(): void;
}

/**
 * What `traceRequests()` (`koa-model-gateway/tracing`) puts on `ctx.state.tracing`: the request's
 * trace id and a way to trace each upstream attempt of it. Without it nothing is traced.
 */
export interface RequestTracing {
  /** The W3C trace id (32 hex digits) of the request's span; '' when there is none. */
  readonly traceId: string;
  attempt(start: AttemptStart): AttemptTrace;
}

declare module 'koa' {
  interface DefaultState {
    /** Set by `traceRequests()`. */
    tracing?: RequestTracing;
  }
}
