import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { ConfigError } from './config-error.js';
import { missingPackages } from './peers.js';

type Environment = Readonly<Record<string, string | undefined>>;

const PROTOCOLS = ['http/protobuf', 'http/json'];
const SDK_PACKAGES = ['@opentelemetry/api', '@opentelemetry/sdk-trace-node', '@opentelemetry/sdk-trace-base', '@opentelemetry/resources'];
/** How often the exporter's and the SDK's own messages may be logged: one line a minute at most each. */
const DIAG_LINE_MS = 60_000;
/** How long shutdown waits for the last spans to be exported: a collector that does not answer may not hold the exit up. */
const FLUSH_BOUND_MS = 5_000;

/** The server's traces, when the OTEL_* environment turns them on. */
export interface ServerTracing {
  /** `traceRequests()`: first in the app's chain. */
  requests: Middleware;
  /** `tracedStore(store, name)`. */
  traced<Store extends object>(store: Store, name: string): Store;
  /** Exports the spans still waiting (bounded), then stops the SDK. */
  shutdown(): Promise<void>;
}

// The batch processor's count of the spans it dropped, which changes with every line it writes.
const DROPPED_SPANS = /^Dropped (\d+) spans\b/;

/**
 * What the SDK's error handler writes for an exception: its properties as JSON, the stack among
 * them. Undefined for any other message.
 */
function exceptionOf(message: string): { message: string; stack?: string } | undefined {
  if (!message.startsWith('{')) return undefined;
  try {
    const parsed: unknown = JSON.parse(message);
    const { message: text, stack } = (parsed ?? {}) as { message?: unknown; stack?: unknown };
    if (typeof text !== 'string') return undefined;
    return { message: text, ...(typeof stack === 'string' && { stack }) };
  } catch {
    return undefined;
  }
}

/**
 * The OpenTelemetry SDK's warnings and errors as log lines, each message at most once a minute (a
 * collector that is down fails every batch), with how often it was left out since its last line. The
 * spans the exporter's queue dropped are one message whatever their count, logged with the spans
 * dropped since its last line; an exception the SDK wrote as JSON is logged as its message, with its
 * stack in a field. `nowMs` is the clock.
 */
export function diagLogger(logger: Logger, nowMs: () => number = Date.now) {
  const last = new Map<string, { at: number; repeated: number; spans: number }>();
  const write = (text: string, args: unknown[]) => {
    const dropped = DROPPED_SPANS.exec(text);
    const exception = exceptionOf(text);
    const message = dropped ? 'Dropped spans' : (exception?.message ?? text);
    const now = nowMs();
    let seen = last.get(message);
    if (seen === undefined) last.set(message, (seen = { at: -Infinity, repeated: 0, spans: 0 }));
    if (dropped) seen.spans += Number(dropped[1]);
    if (now - seen.at < DIAG_LINE_MS) {
      seen.repeated++;
      return;
    }
    const detail = args.map((arg) => (arg instanceof Error ? arg.message : typeof arg === 'string' ? arg : '')).filter((piece) => piece !== '');
    logger.warn(
      {
        component: 'tracing',
        detail: detail.length > 0 ? detail.join('; ') : undefined,
        stack: exception?.stack,
        spans: dropped ? seen.spans : undefined,
        repeated: seen.repeated || undefined,
      },
      dropped ? `Dropped ${seen.spans} spans since the last such line: the export queue was full` : message,
    );
    Object.assign(seen, { at: now, repeated: 0, spans: 0 });
  };
  const ignore = () => undefined;
  return {
    error: (message: string, ...args: unknown[]) => write(message, args),
    warn: (message: string, ...args: unknown[]) => write(message, args),
    info: ignore,
    debug: ignore,
    verbose: ignore,
  };
}

/** Where and how the spans go when the OTEL_* environment turns traces on (see `startTracing`), else null. */
function tracingSettings(env: Environment): { url: string; protocol: string; json: boolean } | null {
  const tracesEndpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if ((!tracesEndpoint && !endpoint) || env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true' || env.OTEL_TRACES_EXPORTER?.trim() === 'none') return null;
  const url = tracesEndpoint || `${(endpoint as string).replace(/\/+$/, '')}/v1/traces`;
  const urlSetting = tracesEndpoint ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  // The value is not repeated: it may hold a password.
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) throw new ConfigError(`${urlSetting} must be an http:// or https:// URL`);
  const protocolSetting = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = env[protocolSetting] || 'http/protobuf';
  if (!PROTOCOLS.includes(protocol)) throw new ConfigError(`${protocolSetting} must be http/protobuf or http/json, got '${protocol}'`);
  return { url, protocol, json: protocol === 'http/json' };
}

/** `url` as it may be logged: without the user name and password it may carry. */
function withoutCredentials(url: string): string {
  const parsed = new URL(url);
  parsed.username = '';
  parsed.password = '';
  return parsed.toString();
}

/**
 * The packages the traces `env` asks for need: none when it leaves them off. A protocol other than
 * http/protobuf and http/json is a `ConfigError`.
 */
export function tracingPackages(env: Environment): string[] {
  const settings = tracingSettings(env);
  if (!settings) return [];
  return [...SDK_PACKAGES, settings.json ? '@opentelemetry/exporter-trace-otlp-http' : '@opentelemetry/exporter-trace-otlp-proto'];
}

/**
 * Starts OpenTelemetry tracing when `OTEL_EXPORTER_OTLP_ENDPOINT` (to which `/v1/traces` is
 * added) or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as it is) is set, unless `OTEL_SDK_DISABLED` is
 * `true` or `OTEL_TRACES_EXPORTER` is `none`: the Node SDK with an OTLP exporter over HTTP,
 * `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` `http/protobuf` (default) or `http/json`, behind a
 * `BatchSpanProcessor` (a bounded queue: a collector that is down costs the requests nothing,
 * and the spans it drops are counted in a warning). The service is `koa-model-gateway` unless
 * `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` say otherwise; the SDK reads its other
 * variables itself from the process's environment (`OTEL_TRACES_SAMPLER`/`_ARG`, `OTEL_BSP_*`,
 * `OTEL_EXPORTER_OTLP_HEADERS`, ...). Without an endpoint nothing of the SDK is loaded, and null
 * is returned. A protocol other than these two, or an SDK package not installed, is a `ConfigError`.
 */
export async function startTracing(env: Environment, logger: Logger): Promise<ServerTracing | null> {
  const settings = tracingSettings(env);
  if (!settings) return null;
  const { url, protocol, json } = settings;
  const missing = missingPackages(tracingPackages(env));
  if (missing.length > 0)
    throw new ConfigError(`tracing (OTEL_EXPORTER_OTLP_ENDPOINT) needs ${missing.join(', ')}, not installed: npm install ${missing.join(' ')}`);

  const [api, { NodeTracerProvider }, { BatchSpanProcessor }, resources, { OTLPTraceExporter }, { traceRequests, tracedStore }] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/resources'),
    json ? import('@opentelemetry/exporter-trace-otlp-http') : import('@opentelemetry/exporter-trace-otlp-proto'),
    import('koa-model-gateway/tracing'),
  ]);
  api.diag.setLogger(diagLogger(logger), api.DiagLogLevel.WARN);
  // The environment's service name and attributes win over the default name.
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.name': 'koa-model-gateway' }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }))] });
  // The global provider, W3C trace context propagation and the AsyncLocalStorage context manager.
  provider.register();
  logger.info({ url: withoutCredentials(url), protocol, sampler: env.OTEL_TRACES_SAMPLER }, 'tracing');
  return {
    requests: traceRequests(),
    traced: (store, name) => tracedStore(store, name),
    async shutdown() {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          logger.warn({ component: 'tracing' }, `spans not exported within ${FLUSH_BOUND_MS} ms of shutdown: dropped`);
          resolve();
        }, FLUSH_BOUND_MS);
      });
      await Promise.race([
        provider.shutdown().catch((err: unknown) => logger.warn({ component: 'tracing', detail: (err as Error).message }, 'spans not exported at shutdown')),
        bound,
      ]);
      clearTimeout(timer);
      // The globals given up, so that a gateway started again in this process registers its own.
      api.trace.disable();
      api.context.disable();
      api.propagation.disable();
      api.diag.disable();
    },
  };
}
