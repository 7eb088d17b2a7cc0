import { format } from 'node:util';
import test from 'ava';
import { errors, GatewayError } from '../../lib/errors/gateway-error.js';

test('a GatewayError is an Error to its readers, yet captures no stack and touches no global to avoid it', (t) => {
  const limit = Error.stackTraceLimit;
  let writes = 0;
  // Any write to the global while errors are made is seen here.
  Object.defineProperty(Error, 'stackTraceLimit', { configurable: true, get: () => limit, set: () => void writes++ });
  let err: GatewayError;
  try {
    err = errors.invalidApiKey();
  } finally {
    Object.defineProperty(Error, 'stackTraceLimit', { configurable: true, writable: true, value: limit });
  }
  t.is(writes, 0);
  t.true(err instanceof GatewayError);
  t.true(err instanceof Error);
  t.is(err.stack, undefined);
  t.is(String(err), 'GatewayError: Invalid API key');
  t.regex(format('%o', err), /GatewayError: Invalid API key/);
  t.like(err, { name: 'GatewayError', message: 'Invalid API key', status: 401, expose: true, code: 'invalid_api_key' });
});
