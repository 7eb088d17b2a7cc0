import { randomBytes } from 'node:crypto';
import type { StoreAssertions, StoreContractTest } from './store-contract-test.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { CreationLimiter, CreationReservation } from '../quota/creation-limiter.js';
import type { CreationLimitsOptions, CreationUsage } from '../quota/creation-limits.js';

/** A limiter as the contract sees it: the interface, and its counters to check. */
export type LimiterUnderTest = CreationLimiter & { usage(account: string): Promise<CreationUsage> };

/** A clock the test moves by hand, so that no test depends on where in a minute it runs. */
export interface TestClock {
  /** The time, in milliseconds since the Unix epoch. */
  ms: number;
  nowMs: () => number;
}

export function testClock(iso: string): TestClock {
  const state: TestClock = { ms: Date.parse(iso), nowMs: () => state.ms };
  return state;
}

/**
 * The contracts' clock: `testClock`, plus a fraction of a millisecond, as `performance.timeOrigin
 * + performance.now()` gives. A store that hands such a time to an integer column (PostgreSQL
 * refuses the fraction) or to a Redis command that takes integers fails its contract.
 */
export function contractClock(iso: string): TestClock {
  const state: TestClock = { ms: Date.parse(iso), nowMs: () => state.ms + 0.375 };
  return state;
}

export const newAccount = () => `acct_${randomBytes(6).toString('hex')}`;

/** Asserts that `reservation` is refused with exactly this 429 code and retry-after. */
export async function assertRefused(
  t: StoreAssertions,
  reservation: Promise<CreationReservation>,
  code: 'rate_limit_exceeded' | 'ingestion_quota_exceeded',
  retryAfterSeconds: number,
): Promise<void> {
  // `any`: a GatewayError is no native error (it captures no stack).
  const err = await t.throwsAsync(reservation, { any: true, instanceOf: GatewayError });
  t.like(err, { status: 429, type: 'rate_limit_error', code });
  t.deepEqual(err instanceof GatewayError ? err.headers : undefined, { 'retry-after': String(retryAfterSeconds) });
}

async function reserveMany(limiter: CreationLimiter, account: string, count: number, bytes = 1): Promise<CreationReservation[]> {
  const reservations: CreationReservation[] = [];
  for (let i = 0; i < count; i += 1) reservations.push(await limiter.reserve(account, bytes));
  return reservations;
}

/**
 * The behaviour every CreationLimiter must have (api.md section 8, decisions.md "Limits and the
 * three 429 codes"); run once per implementation. `makeLimiter` gets the limits and a clock.
 */
export function creationLimiterContract(
  test: StoreContractTest,
  name: string,
  makeLimiter: (options: CreationLimitsOptions) => Promise<LimiterUnderTest>,
): void {
  test(`${name}: the 10th creation in a minute passes, the 11th waits for the next minute`, async (t) => {
    const time = contractClock('2030-01-15T12:00:15.300Z');
    const limiter = await makeLimiter({ nowMs: time.nowMs });
    const account = newAccount();
    await reserveMany(limiter, account, 10);
    // 44.7 s to 12:01:00, rounded up: a client that waits that long is allowed.
    await assertRefused(t, limiter.reserve(account, 1), 'rate_limit_exceeded', 45);
    time.ms = Date.parse('2030-01-15T12:00:59.999Z');
    await assertRefused(t, limiter.reserve(account, 1), 'rate_limit_exceeded', 1);
    time.ms = Date.parse('2030-01-15T12:01:00.000Z');
    await t.notThrowsAsync(limiter.reserve(account, 1));
    t.deepEqual(await limiter.usage(account), { createsThisMinute: 1, createsToday: 11, bytesToday: 11 });
  });

  test(`${name}: createsPerMinute is an option`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter({ createsPerMinute: 3, nowMs: time.nowMs });
    const account = newAccount();
    await reserveMany(limiter, account, 3);
    await assertRefused(t, limiter.reserve(account, 1), 'rate_limit_exceeded', 60);
  });

  test(`${name}: the 1,000th creation in a UTC day passes, the 1,001st waits for midnight`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter({ nowMs: time.nowMs });
    const account = newAccount();
    for (let i = 0; i < 1000; i += 1) {
      await limiter.reserve(account, 1);
      time.ms += 6000; // 10 a minute: the minute limit never refuses
    }
    t.like(await limiter.usage(account), { createsToday: 1000 });
    // 13:40:00: 10h20m to midnight.
    await assertRefused(t, limiter.reserve(account, 1), 'rate_limit_exceeded', 37_200);
    t.like(await limiter.usage(account), { createsToday: 1000, createsThisMinute: 0 });
  });

  test(`${name}: the day is the UTC day, from midnight, not 24 hours from the first creation`, async (t) => {
    const time = contractClock('2030-01-15T23:59:30.000Z');
    const limiter = await makeLimiter({ createsPerDay: 2, nowMs: time.nowMs });
    const account = newAccount();
    await reserveMany(limiter, account, 2);
    time.ms = Date.parse('2030-01-15T23:59:59.500Z');
    await assertRefused(t, limiter.reserve(account, 1), 'rate_limit_exceeded', 1);
    time.ms = Date.parse('2030-01-16T00:00:00.000Z');
    await reserveMany(limiter, account, 2);
    await assertRefused(t, limiter.reserve(account, 1), 'rate_limit_exceeded', 86_400);
  });

  test(`${name}: exactly the remaining bytes of the day fit, one byte more is ingestion_quota_exceeded`, async (t) => {
    const time = contractClock('2030-01-15T18:00:00.250Z');
    const limiter = await makeLimiter({ nowMs: time.nowMs });
    const account = newAccount();
    await limiter.reserve(account, 1_073_741_824 - 1000);
    // 5h59m59.75s to midnight, rounded up.
    await assertRefused(t, limiter.reserve(account, 1001), 'ingestion_quota_exceeded', 21_600);
    await limiter.reserve(account, 1000);
    await assertRefused(t, limiter.reserve(account, 1), 'ingestion_quota_exceeded', 21_600);
    t.deepEqual(await limiter.usage(account), { createsThisMinute: 2, createsToday: 2, bytesToday: 1_073_741_824 });
  });

  test(`${name}: bytesPerDay is an option, and a file larger than the whole quota is refused`, async (t) => {
    const time = contractClock('2030-01-15T00:00:00.000Z');
    const limiter = await makeLimiter({ bytesPerDay: 100, nowMs: time.nowMs });
    const account = newAccount();
    await assertRefused(t, limiter.reserve(account, 101), 'ingestion_quota_exceeded', 86_400);
    await limiter.reserve(account, 60);
    await assertRefused(t, limiter.reserve(account, 41), 'ingestion_quota_exceeded', 86_400);
    await limiter.reserve(account, 40);
    t.like(await limiter.usage(account), { bytesToday: 100, createsToday: 2 });
  });

  test(`${name}: a refusal counts nothing, whichever limit refuses`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter({ createsPerMinute: 2, createsPerDay: 3, bytesPerDay: 100, nowMs: time.nowMs });
    const account = newAccount();
    await reserveMany(limiter, account, 2, 10);
    const before = await limiter.usage(account);
    await assertRefused(t, limiter.reserve(account, 10), 'rate_limit_exceeded', 60); // minute
    await assertRefused(t, limiter.reserve(account, 81), 'ingestion_quota_exceeded', 43_200); // bytes, before the minute
    t.deepEqual(await limiter.usage(account), before);
    time.ms += 60_000;
    await limiter.reserve(account, 10);
    const full = await limiter.usage(account);
    await assertRefused(t, limiter.reserve(account, 10), 'rate_limit_exceeded', 43_140); // day
    t.deepEqual(await limiter.usage(account), full);
  });

  test(`${name}: when the day and the minute both refuse, retry-after is to midnight`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter({ createsPerMinute: 2, createsPerDay: 2, nowMs: time.nowMs });
    const account = newAccount();
    await reserveMany(limiter, account, 2);
    await assertRefused(t, limiter.reserve(account, 1), 'rate_limit_exceeded', 43_200);
  });

  test(`${name}: release gives back exactly what was spent, once`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter({ nowMs: time.nowMs });
    const account = newAccount();
    await limiter.reserve(account, 500);
    const reservation = await limiter.reserve(account, 700);
    t.deepEqual(await limiter.usage(account), { createsThisMinute: 2, createsToday: 2, bytesToday: 1200 });
    await reservation.release();
    t.deepEqual(await limiter.usage(account), { createsThisMinute: 1, createsToday: 1, bytesToday: 500 });
    await Promise.all([reservation.release(), reservation.release()]);
    t.deepEqual(await limiter.usage(account), { createsThisMinute: 1, createsToday: 1, bytesToday: 500 });
  });

  test(`${name}: a released creation can be made again at once`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter({ createsPerMinute: 2, nowMs: time.nowMs });
    const account = newAccount();
    const [, last] = await reserveMany(limiter, account, 2);
    await assertRefused(t, limiter.reserve(account, 1), 'rate_limit_exceeded', 60);
    await last?.release();
    await t.notThrowsAsync(limiter.reserve(account, 1));
  });

  test(`${name}: a late release gives back only to the windows it was spent in`, async (t) => {
    const time = contractClock('2030-01-15T23:59:50.000Z');
    const limiter = await makeLimiter({ nowMs: time.nowMs });
    const account = newAccount();
    const yesterday = await limiter.reserve(account, 300);
    time.ms = Date.parse('2030-01-16T00:00:10.000Z');
    await limiter.reserve(account, 40);
    await yesterday.release();
    t.deepEqual(await limiter.usage(account), { createsThisMinute: 1, createsToday: 1, bytesToday: 40 });
  });

  test(`${name}: accounts have their own counters`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter({ createsPerMinute: 1, nowMs: time.nowMs });
    const [a, b] = [newAccount(), newAccount()];
    await limiter.reserve(a, 1);
    await t.notThrowsAsync(limiter.reserve(b, 1));
    await assertRefused(t, limiter.reserve(a, 1), 'rate_limit_exceeded', 60);
  });

  test(`${name}: 50 parallel reservations in one minute: exactly 10 pass`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter({ nowMs: time.nowMs });
    const account = newAccount();
    const results = await Promise.allSettled(Array.from({ length: 50 }, () => limiter.reserve(account, 1000)));
    t.is(results.filter((result) => result.status === 'fulfilled').length, 10);
    for (const result of results) {
      if (result.status === 'rejected') t.like(result.reason, { status: 429, code: 'rate_limit_exceeded' });
    }
    t.deepEqual(await limiter.usage(account), { createsThisMinute: 10, createsToday: 10, bytesToday: 10_000 });
  });

  test(`${name}: requests being refused never make one that fits fail`, async (t) => {
    // Each large one passes the creation counts and is refused by the bytes: if its counts were
    // spent first and given back after, a small one looking in between would find the minute full.
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter({ createsPerMinute: 10, bytesPerDay: 1000, nowMs: time.nowMs });
    const account = newAccount();
    await reserveMany(limiter, account, 9);
    const sizes = Array.from({ length: 41 }, (_, i) => (i === 20 ? 1 : 992));
    const results = await Promise.allSettled(sizes.map((bytes) => limiter.reserve(account, bytes)));
    t.is(results[20]?.status, 'fulfilled');
    t.is(results.filter((result) => result.status === 'fulfilled').length, 1);
    t.deepEqual(await limiter.usage(account), { createsThisMinute: 10, createsToday: 10, bytesToday: 10 });
  });

  test(`${name}: 50 parallel reservations with releases among them keep the counters exact`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter({ createsPerMinute: 50, nowMs: time.nowMs });
    const account = newAccount();
    await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const reservation = await limiter.reserve(account, 10);
        if (i % 2 === 0) await reservation.release();
      }),
    );
    t.deepEqual(await limiter.usage(account), { createsThisMinute: 25, createsToday: 25, bytesToday: 250 });
  });

  test(`${name}: limit options are checked at start-up`, async (t) => {
    for (const bad of [{ createsPerMinute: 0 }, { createsPerDay: 1.5 }, { bytesPerDay: -1 }, { createsPerMinute: Number.NaN }]) {
      await t.throwsAsync(makeLimiter(bad), { instanceOf: TypeError, message: /koa-model-gateway: .* must be a positive integer/ });
    }
  });

  test(`${name}: a byte count that cannot be a size is a TypeError`, async (t) => {
    const limiter = await makeLimiter({});
    for (const bytes of [-1, 1.5, Number.NaN]) {
      await t.throwsAsync(limiter.reserve(newAccount(), bytes), { instanceOf: TypeError });
    }
  });
}
