import test from 'ava';
import { errors, GatewayError, StoreUnavailableError } from '../../lib/errors/gateway-error.js';

test('a GatewayError carries no stack frames, and leaves stack capture on for every other error', (t) => {
  const limit = Error.stackTraceLimit;
  const err = errors.invalidApiKey();
  t.true(err instanceof GatewayError);
  t.true(err instanceof Error);
  t.is(err.message, 'Invalid API key');
  t.notRegex(err.stack ?? '', /\n\s+at /);
  t.is(Error.stackTraceLimit, limit);
  t.regex(new Error('a bug').stack ?? '', /\n\s+at /);
  t.regex(new StoreUnavailableError().stack ?? '', /\n\s+at /);
});
