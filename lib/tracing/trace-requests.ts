import type { RouterContext } from '@koa/router';
import {
  context,
  isSpanContextValid,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context as TraceContext,
  type Span,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import type { Context, Middleware } from 'koa';
import { z } from 'zod';
import { withoutSecrets } from '../auth/without-secrets.js';
import { afterResponse } from '../http/after-response.js';
import type { AttemptStart, AttemptTrace, ModelRequestState, RequestTracing, ToolCallStart, ToolCallTrace } from '../state.js';
import { parseOptions, settingsObject } from '../settings/schemas.js';
import { AttemptSpan } from './attempt-span.js';
import { tracerOf, tracerProviderOption } from './tracer.js';

export interface TraceRequestsOptions {
  /** Where the spans go. Default: the global tracer provider, the one an OpenTelemetry SDK registers (a no-op without one). */
  tracerProvider?: TracerProvider;
  /**
   * Records message contents on the upstream attempt spans: `gen_ai.input.messages`,
   * `gen_ai.system_instructions` and `gen_ai.output.messages` (text parts; other parts by their
   * type only). Default `false`: contents may hold personal data, and traces are often kept
   * where the data may not go.
   */
  recordContent?: boolean;
}

const optionsSchema = settingsObject({
  tracerProvider: tracerProviderOption,
  recordContent: z.boolean({ error: 'must be true or false' }).default(false),
});

// The HTTP conventions' known methods; any other is `_OTHER`, the method itself in `http.request.method_original`.
const METHODS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE']);

/** The traces of one request: what `ctx.state.tracing` holds. */
class RequestTrace implements RequestTracing {
  readonly traceId: string;
  readonly #tracer: Tracer;
  readonly #context: TraceContext;
  readonly #recordContent: boolean;

  constructor(tracer: Tracer, active: TraceContext, traceId: string, recordContent: boolean) {
    this.#tracer = tracer;
    this.#context = active;
    this.traceId = traceId;
    this.#recordContent = recordContent;
  }

  attempt(start: AttemptStart): AttemptTrace {
    return new AttemptSpan(this.#tracer, this.#context, start, this.#recordContent);
  }

  tool({ server, tool, callId }: ToolCallStart): ToolCallTrace {
    // The GenAI conventions' execute_tool span: INTERNAL, named after the tool.
    const attributes: Attributes = {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': tool,
      'gen_ai.tool.type': 'extension',
      'gen_ai.tool.call.id': callId,
      'mcp.method.name': 'tools/call',
      'kmg.mcp.server': server,
    };
    const span = this.#tracer.startSpan(`execute_tool ${tool}`, { kind: SpanKind.INTERNAL, attributes }, this.#context);
    const headers: Record<string, string> = {};
    propagation.inject(trace.setSpan(this.#context, span), headers);
    return {
      headers,
      end(errorType) {
        if (errorType !== undefined) {
          span.setAttribute('error.type', errorType);
          span.setStatus({ code: SpanStatusCode.ERROR });
        }
        span.end();
      },
    };
  }
}

/** What is known of a request once its response has ended. */
function endServerSpan(ctx: Context, span: Span, method: string): void {
  const { res, state } = ctx;
  const attributes: Attributes = { 'http.response.status_code': res.statusCode };
  const route = (ctx as Partial<RouterContext>).routerPath;
  if (typeof route === 'string') {
    attributes['http.route'] = route;
    span.updateName(`${method} ${route}`);
  }
  const key = state.apiKey;
  if (key) {
    attributes['kmg.key.id'] = key.id;
    attributes['kmg.account'] = key.account;
  }
  const model = state.modelRequest as ModelRequestState | undefined;
  if (model) {
    attributes['kmg.model'] = model.model;
    if (model.limitedBy) attributes['kmg.limited_by'] = model.limitedBy;
    if (model.cache) attributes['kmg.cache'] = model.cache;
  }
  if (res.statusCode >= 500) {
    attributes['error.type'] = String(res.statusCode);
    span.setStatus({ code: SpanStatusCode.ERROR });
  } else if (!res.writableFinished) {
    // The client left before its answer was complete.
    attributes['error.type'] = 'cancelled';
  }
  span.setAttributes(attributes);
  span.end();
}

/**
 * The SERVER span of each request, with the OpenTelemetry HTTP conventions'
 * `http.request.method`, `url.path`, `url.scheme`, `server.address`, `server.port`,
 * `client.address`, `network.protocol.version`, `user_agent.original`, `http.route`,
 * `http.response.status_code` and `error.type` (5xx; `cancelled` for a client that left), plus the API key's id and account (`kmg.key.id`, `kmg.account`: never the
 * key), ended when the response has (its last byte sent, or the client gone). The request's W3C
 * `traceparent`/`tracestate` is continued; the span is the active one for the rest of the chain
 * (store spans of `tracedStore()` hang below it), and `ctx.state.tracing` lets the model
 * endpoints add one CLIENT span per upstream attempt with the GenAI conventions' attributes,
 * whose trace context the built-in providers send upstream. `ctx.state.tracing.traceId` is for
 * log lines. Put it first in the chain. Spans go through `@opentelemetry/api`: without an SDK
 * registered they cost next to nothing and go nowhere.
 * @example
 * import { traceRequests } from 'koa-model-gateway/tracing';
 * app.use(traceRequests()); // with an OpenTelemetry SDK registered
 */
export function traceRequests(options: TraceRequestsOptions = {}): Middleware {
  const { tracerProvider, recordContent } = parseOptions(optionsSchema, options, 'traceRequests()');
  const tracer = tracerOf(tracerProvider);
  return async function traceRequests(ctx, next) {
    const known = METHODS.has(ctx.method);
    const method = known ? ctx.method : 'HTTP';
    const { socket } = ctx.req;
    const attributes: Attributes = {
      'http.request.method': known ? ctx.method : '_OTHER',
      // A key a client put in its path or user agent is not recorded.
      'url.path': withoutSecrets(ctx.path),
      'url.scheme': ctx.protocol,
      'server.address': ctx.hostname,
      'network.protocol.version': ctx.req.httpVersion,
    };
    if (!known) attributes['http.request.method_original'] = ctx.method;
    if (socket.localPort !== undefined) attributes['server.port'] = socket.localPort;
    if (socket.remoteAddress !== undefined) attributes['client.address'] = socket.remoteAddress;
    const userAgent = ctx.get('user-agent');
    if (userAgent !== '') attributes['user_agent.original'] = withoutSecrets(userAgent);
    const parent = propagation.extract(ROOT_CONTEXT, ctx.headers);
    const span = tracer.startSpan(method, { kind: SpanKind.SERVER, attributes }, parent);
    const active = trace.setSpan(parent, span);
    const spanContext = span.spanContext();
    ctx.state.tracing = new RequestTrace(tracer, active, isSpanContextValid(spanContext) ? spanContext.traceId : '', recordContent);
    await context.with(active, () => afterResponse(ctx, next, () => endServerSpan(ctx, span, method)));
  };
}
