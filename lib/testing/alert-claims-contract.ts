import type { AlertClaims } from '../cost/budget-alerts.js';
import type { StoreContractTest } from './store-contract-test.js';

/**
 * What every `AlertClaims` does, run against each of them: a fresh store (or one whose keys nobody
 * else uses) from `make`. Claims expire a minute from now: the suite waits for none.
 */
export function alertClaimsContract(test: StoreContractTest, name: string, make: () => Promise<AlertClaims>): void {
  const inAMinute = () => Date.now() + 60_000;

  test(`${name}: the first claim of a name wins and every later one is refused; another name is its own`, async (t) => {
    const claims = await make();
    t.true(await claims.claim('account:acme:day:2026-12-06:80', inAMinute()));
    t.false(await claims.claim('account:acme:day:2026-12-06:80', inAMinute()));
    t.true(await claims.claim('account:acme:day:2026-12-06:100', inAMinute()));
    t.true(await claims.claim('key:key_1:day:2026-12-06:80', inAMinute()));
  });

  test(`${name}: of claims of one name made at once, exactly one wins`, async (t) => {
    const claims = await make();
    const won = await Promise.all(Array.from({ length: 10 }, () => claims.claim('account:acme:month:2026-12:50', inAMinute())));
    t.is(won.filter(Boolean).length, 1);
  });
}
