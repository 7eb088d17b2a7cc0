import type { Context } from 'koa';
import { pino, type DestinationStream, type Logger } from 'pino';
import { GatewayError, StoreUnavailableError } from 'koa-model-gateway/errors';
import { AttemptFailedError } from 'koa-model-gateway/models';
import { OutageLog } from './outage-log.js';

/**
 * The server's logger: JSON lines on stdout, or on `destination`. Request headers are never
 * logged, so no key can reach a log line.
 * @example const logger = createLogger('info')
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino({ level, base: { service: 'koa-model-gateway' } }, destination);
}

/** An outage's causes are cut here: its line stays short however long a driver's message. */
const MAX_CAUSE_CHARS = 300;
/**
 * The store an outage without a name is of: the drivers' own errors that mean "unreachable"
 * (pg's, SQLite's) come from the database; the other stores name themselves.
 */
const UNNAMED_STORE = 'database';
/** How far down a chain of causes the line looks. */
const MAX_CAUSE_DEPTH = 4;

interface ErrorLike {
  name?: unknown;
  code?: unknown;
  message?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/** The causes behind an outage, outermost first, as `code (or name): message` in one short string. */
function causeLine(cause: unknown): string | undefined {
  const parts: string[] = [];
  for (let current = cause, depth = 0; current != null && depth < MAX_CAUSE_DEPTH; depth++) {
    if (typeof current !== 'object') {
      parts.push(String(current));
      break;
    }
    const { name, code, message, errors } = current as ErrorLike;
    const label = typeof code === 'string' || typeof code === 'number' ? String(code) : typeof name === 'string' ? name : 'Error';
    // An AggregateError (a connection refused on each address of a host) says why in its first error.
    const first: ErrorLike | undefined = Array.isArray(errors) && typeof errors[0] === 'object' ? (errors[0] as ErrorLike) : undefined;
    const text = typeof message === 'string' && message !== '' ? message : typeof first?.message === 'string' ? first.message : '';
    parts.push(text === '' ? label : `${label}: ${text}`);
    current = (current as ErrorLike).cause;
  }
  if (parts.length === 0) return undefined;
  const line = parts.join(' <- ');
  return line.length > MAX_CAUSE_CHARS ? `${line.slice(0, MAX_CAUSE_CHARS - 1)}…` : line;
}

/** The backend a `StoreUnavailableError` in the chain names, if any. */
function storeOf(cause: unknown): string | undefined {
  for (let current = cause, depth = 0; current instanceof Error && depth < MAX_CAUSE_DEPTH; depth++) {
    if (current instanceof StoreUnavailableError && current.store !== undefined) return current.store;
    current = current.cause;
  }
  return undefined;
}

/**
 * The app's `'error'` listener. A known outage, which the formatters report as the GatewayError
 * they answered (503 from a store, 502 or 504 from an upstream) with its `cause`, is one short
 * line with no stack; a store's goes to `outages`, which writes the first of an outage and counts
 * the rest. Anything else (a 500) is a bug and is logged whole, stack and all. A client that hung
 * up mid-request is no failure of ours: its request line says 499, and this only a debug line.
 * @example app.on('error', logAppError(logger, outages))
 */
export function logAppError(logger: Logger, outages = new OutageLog(logger)): (err: unknown, ctx?: Context) => void {
  return function logAppError(err, ctx) {
    const requestId = ctx?.state.requestId;
    if (ctx?.req.socket.destroyed && !ctx.res.writableFinished) {
      logger.debug({ err, requestId }, 'client went away');
    } else if (err instanceof AttemptFailedError) {
      const fields = {
        requestId,
        provider: err.provider,
        upstreamModel: err.upstreamModel,
        attempt: err.attempt,
        outcome: err.outcome,
        cause: causeLine(err.cause),
      };
      logger.warn(fields, 'upstream attempt failed, retrying');
    } else if (err instanceof GatewayError && err.status === 503) {
      const fields = { requestId, status: err.status, kind: err.code, cause: causeLine(err.cause) };
      outages.failed(storeOf(err.cause) ?? UNNAMED_STORE, fields);
    } else if (err instanceof GatewayError && err.status !== 500) {
      const fields = { requestId, status: err.status, kind: err.code, provider: ctx?.state.modelRequest?.provider, cause: causeLine(err.cause) };
      logger.error(fields, 'upstream failed');
    } else {
      logger.error({ err, requestId }, 'request failed');
    }
  };
}
