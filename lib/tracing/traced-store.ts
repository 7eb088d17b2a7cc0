import { finished, Readable } from 'node:stream';
import { context, SpanStatusCode, trace, type Span, type TracerProvider } from '@opentelemetry/api';
import { parseOptions, settingsObject } from '../settings/schemas.js';
import { tracerOf, tracerProviderOption } from './tracer.js';

export interface TracedStoreOptions {
  /** Where the spans go. Default: the global tracer provider. */
  tracerProvider?: TracerProvider;
}

const optionsSchema = settingsObject({ tracerProvider: tracerProviderOption });

/** Lifecycle methods: no request waits on them. */
const UNTRACED = new Set(['constructor', 'init', 'close']);

function fail(span: Span, err: unknown): void {
  const { code, name } = (err ?? {}) as { code?: unknown; name?: unknown };
  span.setAttribute('error.type', typeof code === 'string' ? code : typeof name === 'string' ? name : '_OTHER');
  span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}

/** Ends `span` when `result` is complete: a promise when it settles, a stream it resolves to when the stream has ended. */
function endWith(span: Span, result: unknown): unknown {
  if (!(result instanceof Promise)) {
    span.end();
    return result;
  }
  return result.then(
    (value: unknown) => {
      if (value instanceof Readable) {
        // A download: the span lasts until its bytes have been read (or the read failed).
        const cleanup = finished(value, (err) => {
          cleanup();
          if (err && !value.readableEnded) fail(span, err);
          else span.end();
        });
      } else {
        span.end();
      }
      return value;
    },
    (err: unknown) => {
      fail(span, err);
      throw err;
    },
  );
}

/**
 * `store` with every method call made inside a request traced as an INTERNAL span named
 * `{name}.{method}` (`FileStore.create`, `BlobStore.get`, `ModelLimiter.consume`), a child of the
 * request's span (`traceRequests()`), with `error.type` when it fails: so that a slow database,
 * bucket or Redis shows in the trace of the request that waited on it. A method returning a
 * stream (`BlobStore.get`) is traced until the stream has ended. Calls outside a traced request
 * (sweeps, background writes) and the lifecycle methods (`init`, `close`) are passed on as they
 * are. Works on any store or limiter interface of the package, or any object.
 * @example
 * filesRouter({ files: tracedStore(files, 'FileStore'), blobs: tracedStore(blobs, 'BlobStore'), limiter })
 */
export function tracedStore<Store extends object>(store: Store, name: string, options: TracedStoreOptions = {}): Store {
  const { tracerProvider } = parseOptions(optionsSchema, options, 'tracedStore()');
  const tracer = tracerOf(tracerProvider);
  const methods = new Map<PropertyKey, unknown>();
  return new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      let method = methods.get(property);
      if (method === undefined) {
        const original = value as (...args: unknown[]) => unknown;
        const spanName = `${name}.${String(property)}`;
        method =
          typeof property !== 'string' || UNTRACED.has(property)
            ? original.bind(target)
            : (...args: unknown[]) => {
                const parent = context.active();
                if (trace.getSpan(parent) === undefined) return original.apply(target, args);
                const span = tracer.startSpan(spanName, undefined, parent);
                let result: unknown;
                try {
                  result = context.with(trace.setSpan(parent, span), () => original.apply(target, args));
                } catch (err) {
                  fail(span, err);
                  throw err;
                }
                return endWith(span, result);
              };
        methods.set(property, method);
      }
      return method;
    },
  });
}
