import test from 'ava';
import { StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { withinTimeout } from '../../lib/stores/knex/store-options.js';

// The one helper that bounds every Knex store call, whatever the driver returns.

test('a thenable that never settles (as a Knex Transaction or query builder is) fails as unavailable at the bound, its signal aborted', async (t) => {
  let signal: AbortSignal | undefined;
  let expired: (() => boolean) | undefined;
  const never: PromiseLike<string> = { then: () => never as never };
  const call = withinTimeout(20, (isExpired, abortSignal) => {
    expired = isExpired;
    signal = abortSignal;
    return never;
  });
  t.false(expired?.());
  await t.throwsAsync(call, { instanceOf: StoreUnavailableError });
  t.true(expired?.());
  t.true(signal?.aborted);
});

test('a thenable that settles in time gives its value; a synchronous answer needs no timer', async (t) => {
  const soon: PromiseLike<number> = { then: (resolve) => Promise.resolve(42).then(resolve) };
  t.is(await withinTimeout(60_000, () => soon), 42);
  t.is(await withinTimeout(60_000, () => 'now'), 'now');
});
