import { GatewayError, StoreUnavailableError, errors } from './gateway-error.js';

// Socket-level failures and the driver errors that mean "the backend is not there".
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'EAI_AGAIN',
  '55000', // PostgreSQL: object not in prerequisite state, as when the database does not accept connections
  'SQLITE_CANTOPEN', // the database file cannot be opened
  'SQLITE_BUSY', // another process held the write lock past the busy timeout
]);
/**
 * PostgreSQL's SQLSTATE classes for a server that cannot serve now: 08 connection exception,
 * 53 insufficient resources (too many connections, disk full), 57 operator intervention
 * (shutdown, a terminated backend, "cannot connect now", a statement cancelled by
 * `statement_timeout`).
 */
const UNAVAILABLE_SQLSTATE = /^(?:08|53|57)[0-9A-Z]{3}$/;
/**
 * pg 8 and pg-pool 3 give these failures a message and no code: the socket closed under a client,
 * a query on a client whose connection was lost before it, a client's `connectionTimeoutMillis`,
 * no pooled client free within the pool's `connectionTimeoutMillis`. Exact texts, tested against
 * the drivers in test/stores/postgres-faults.test.ts.
 */
const UNREACHABLE_MESSAGES = new Set([
  'Connection terminated unexpectedly',
  'Client has encountered a connection error and is not queryable',
  'timeout expired',
  'timeout exceeded when trying to connect',
]);
/** The driver's own words: Knex puts the failed query's SQL and ' - ' before them. */
function driverMessage(message: string): string {
  const separator = message.lastIndexOf(' - ');
  return separator === -1 ? message : message.slice(separator + 3);
}
const UNREACHABLE_NAMES = new Set(['KnexTimeoutError', 'MaxRetriesPerRequestError']);

interface ErrorLike {
  name?: unknown;
  message?: unknown;
  code?: unknown;
  status?: unknown;
  statusCode?: unknown;
  httpCode?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/** True when `err` (or its cause) says that a store's backend could not be reached. */
function isUnreachable(err: unknown, depth = 0): boolean {
  if (err instanceof StoreUnavailableError) return true;
  if (typeof err !== 'object' || err === null || depth > 4) return false;
  const e = err as ErrorLike;
  if (typeof e.code === 'string' && (UNREACHABLE_CODES.has(e.code) || UNAVAILABLE_SQLSTATE.test(e.code))) return true;
  if (typeof e.message === 'string' && UNREACHABLE_MESSAGES.has(driverMessage(e.message))) return true;
  if (typeof e.name === 'string' && UNREACHABLE_NAMES.has(e.name)) return true;
  if (Array.isArray(e.errors) && e.errors.some((inner) => isUnreachable(inner, depth + 1))) return true;
  return isUnreachable(e.cause, depth + 1);
}

function httpStatusOf(err: ErrorLike): number | undefined {
  for (const value of [err.status, err.statusCode, err.httpCode]) {
    if (typeof value === 'number' && value >= 400 && value < 600) return value;
  }
  return undefined;
}

/**
 * Maps anything thrown to a GatewayError. Third-party HTTP errors (co-body, the router) get the
 * matching row with our own wording, never theirs; unreachable stores are 503; everything else is
 * a 500 with no detail.
 */
export function toGatewayError(err: unknown, method: string, path: string): GatewayError {
  if (err instanceof GatewayError) return err;
  if (isUnreachable(err)) return errors.serviceUnavailable();
  const status = typeof err === 'object' && err !== null ? httpStatusOf(err as ErrorLike) : undefined;
  switch (status) {
    case undefined:
      return errors.internal();
    case 400:
      return errors.invalidRequest('The request could not be parsed');
    case 404:
      return errors.unknownUrl(method, path);
    case 405:
    case 501:
      return errors.methodNotAllowed(method);
    case 413:
      return errors.requestTooLarge();
    case 415:
      return errors.unsupportedMediaType();
    default:
      return status >= 500 ? errors.internal() : errors.invalidRequest('The request was not accepted');
  }
}
