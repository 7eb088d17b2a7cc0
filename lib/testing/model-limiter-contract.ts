import type { StoreContractTest } from './store-contract-test.js';
import type { ModelLimiter } from '../quota/model-limiter.js';
import type { ModelLimits } from '../quota/model-limits.js';
import { contractClock, newAccount as newKeyId } from './creation-limiter-contract.js';

/** Calls `consume` `count` times one after the other; how many passed. */
async function consumeMany(limiter: ModelLimiter, keyId: string, limits: ModelLimits, count: number): Promise<number> {
  let allowed = 0;
  for (let i = 0; i < count; i += 1) if ((await limiter.consume(keyId, limits)).allowed) allowed += 1;
  return allowed;
}

/**
 * The behaviour every ModelLimiter must have (decisions.md, "Model calls are limited per key");
 * run once per implementation. `makeLimiter` gets the clock.
 */
export function modelLimiterContract(test: StoreContractTest, name: string, makeLimiter: (clock: () => number) => Promise<ModelLimiter>): void {
  test(`${name}: the 10th call in a minute passes, the 11th waits for the next minute and counts nothing`, async (t) => {
    const time = contractClock('2030-01-15T12:00:15.300Z');
    const limiter = await makeLimiter(time.nowMs);
    const keyId = newKeyId();
    const limits = { requestsPerMinute: 10 };
    const remaining: number[] = [];
    for (let i = 0; i < 10; i += 1) {
      const decision = await limiter.consume(keyId, limits);
      t.true(decision.allowed);
      remaining.push(decision.requests?.remaining ?? -1);
    }
    t.deepEqual(remaining, [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    const refused = await limiter.consume(keyId, limits);
    // 44.7 s to 12:01:00, rounded up.
    t.deepEqual(refused, {
      allowed: false,
      at: time.nowMs(),
      refusedBy: 'requests',
      retryAfterSeconds: 45,
      requests: { per: 'minute', limit: 10, remaining: 0, resetAt: Date.parse('2030-01-15T12:01:00.000Z') },
    });
    t.like(await limiter.usage(keyId), { requestsThisMinute: 10 });
    time.ms = Date.parse('2030-01-15T12:01:00.000Z');
    t.like(await limiter.consume(keyId, limits), { allowed: true, requests: { remaining: 9 } });
  });

  test(`${name}: limits without any field pass every call and count nothing`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter(time.nowMs);
    const keyId = newKeyId();
    for (let i = 0; i < 20; i += 1) t.deepEqual(await limiter.consume(keyId, {}), { allowed: true, at: time.nowMs() });
    await limiter.addTokens(keyId, {}, 1000);
    await limiter.addTokens(keyId, { requestsPerMinute: 5 }, 1000); // no token limit: not counted
    t.deepEqual(await limiter.usage(keyId), { requestsThisMinute: 0, tokensThisMinute: 0, tokensToday: 0 });
  });

  test(`${name}: tokens count when added; calls pass below the limit and are refused from the moment it is reached`, async (t) => {
    const time = contractClock('2030-01-15T12:00:30.000Z');
    const limiter = await makeLimiter(time.nowMs);
    const keyId = newKeyId();
    const limits = { tokensPerMinute: 1000 };
    t.like(await limiter.consume(keyId, limits), { allowed: true, tokens: { per: 'minute', limit: 1000, remaining: 1000 } });
    await limiter.addTokens(keyId, limits, 999);
    t.like(await limiter.consume(keyId, limits), { allowed: true, tokens: { remaining: 1 } });
    await limiter.addTokens(keyId, limits, 1);
    t.like(await limiter.consume(keyId, limits), { allowed: false, refusedBy: 'tokens', retryAfterSeconds: 30, tokens: { remaining: 0 } });
    time.ms = Date.parse('2030-01-15T12:01:00.000Z');
    t.like(await limiter.consume(keyId, limits), { allowed: true, tokens: { remaining: 1000 } });
  });

  test(`${name}: calls in flight when the token limit fills still count, past the limit; remaining stays at 0`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter(time.nowMs);
    const keyId = newKeyId();
    const limits = { tokensPerMinute: 100 };
    t.is(await consumeMany(limiter, keyId, limits, 3), 3); // three calls under way
    for (let i = 0; i < 3; i += 1) await limiter.addTokens(keyId, limits, 80);
    t.like(await limiter.usage(keyId), { tokensThisMinute: 240, tokensToday: 240 });
    t.like(await limiter.consume(keyId, limits), { allowed: false, tokens: { remaining: 0 } });
  });

  test(`${name}: tokens per day refuse until UTC midnight; headers report the window with fewer tokens left`, async (t) => {
    const time = contractClock('2030-01-15T18:00:00.000Z');
    const limiter = await makeLimiter(time.nowMs);
    const keyId = newKeyId();
    const limits = { tokensPerMinute: 500, tokensPerDay: 1000 };
    await limiter.addTokens(keyId, limits, 400);
    t.like(await limiter.consume(keyId, limits), { tokens: { per: 'minute', remaining: 100 } });
    time.ms += 60_000;
    await limiter.addTokens(keyId, limits, 400);
    t.like(await limiter.consume(keyId, limits), { tokens: { per: 'minute', remaining: 100 } });
    time.ms += 60_000;
    await limiter.addTokens(keyId, limits, 50);
    t.like(await limiter.consume(keyId, limits), { allowed: true, tokens: { per: 'day', remaining: 150 } });
    await limiter.addTokens(keyId, limits, 150);
    t.deepEqual(await limiter.consume(keyId, limits), {
      allowed: false,
      at: time.nowMs(),
      refusedBy: 'tokens',
      retryAfterSeconds: 21_480, // 5h58m to midnight
      tokens: { per: 'day', limit: 1000, remaining: 0, resetAt: Date.parse('2030-01-16T00:00:00.000Z') },
    });
    time.ms = Date.parse('2030-01-16T00:00:00.000Z');
    t.like(await limiter.consume(keyId, limits), { allowed: true, tokens: { remaining: 500 } });
  });

  test(`${name}: when several limits refuse, the one that keeps the call out longest is named; a refusal counts no request`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter(time.nowMs);
    const keyId = newKeyId();
    const limits = { requestsPerMinute: 2, tokensPerMinute: 10, tokensPerDay: 100 };
    t.is(await consumeMany(limiter, keyId, limits, 2), 2);
    await limiter.addTokens(keyId, limits, 10);
    // Requests and tokens per minute both full: they end together, requests is named.
    t.like(await limiter.consume(keyId, limits), { allowed: false, refusedBy: 'requests', retryAfterSeconds: 60 });
    time.ms += 60_000;
    await limiter.addTokens(keyId, limits, 90);
    t.like(await limiter.consume(keyId, limits), { allowed: false, refusedBy: 'tokens', retryAfterSeconds: 43_140, requests: { remaining: 2 } });
    t.like(await limiter.usage(keyId), { requestsThisMinute: 0 });
  });

  test(`${name}: tokens count in the window in which the answer ends`, async (t) => {
    const time = contractClock('2030-01-15T12:00:59.000Z');
    const limiter = await makeLimiter(time.nowMs);
    const keyId = newKeyId();
    const limits = { tokensPerMinute: 50 };
    t.true((await limiter.consume(keyId, limits)).allowed);
    time.ms = Date.parse('2030-01-15T12:01:01.000Z');
    await limiter.addTokens(keyId, limits, 50);
    t.like(await limiter.consume(keyId, limits), { allowed: false, retryAfterSeconds: 59 });
  });

  test(`${name}: keys have their own counters`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter(time.nowMs);
    const [a, b] = [newKeyId(), newKeyId()];
    const limits = { requestsPerMinute: 1, tokensPerDay: 10 };
    t.true((await limiter.consume(a, limits)).allowed);
    await limiter.addTokens(a, limits, 10);
    t.true((await limiter.consume(b, limits)).allowed);
    t.false((await limiter.consume(a, { tokensPerDay: 10 })).allowed);
  });

  test(`${name}: 50 parallel calls with 10 requests per minute: exactly 10 pass`, async (t) => {
    const time = contractClock('2030-01-15T12:00:00.000Z');
    const limiter = await makeLimiter(time.nowMs);
    const keyId = newKeyId();
    const decisions = await Promise.all(Array.from({ length: 50 }, () => limiter.consume(keyId, { requestsPerMinute: 10 })));
    t.is(decisions.filter((decision) => decision.allowed).length, 10);
    t.like(await limiter.usage(keyId), { requestsThisMinute: 10 });
  });

  test(`${name}: a token count that cannot be one is a TypeError`, async (t) => {
    const limiter = await makeLimiter(Date.now);
    for (const tokens of [-1, 1.5, Number.NaN]) {
      await t.throwsAsync(limiter.addTokens(newKeyId(), { tokensPerDay: 10 }, tokens), { instanceOf: TypeError });
    }
  });
}
