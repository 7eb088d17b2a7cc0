import { trace, type Tracer, type TracerProvider } from '@opentelemetry/api';
import { z } from 'zod';

/** The instrumentation scope of every span of the package. */
export const TRACER_NAME = 'koa-model-gateway';

export const tracerProviderOption = z
  .custom<TracerProvider>((value) => typeof (value as Partial<TracerProvider>)?.getTracer === 'function', { error: 'must be a TracerProvider' })
  .optional();

/** The package's tracer from `provider`, else from the global provider (the one an SDK registers; a no-op without one). */
export function tracerOf(provider: TracerProvider | undefined): Tracer {
  return (provider ?? trace.getTracerProvider()).getTracer(TRACER_NAME);
}
