import test from 'ava';
import Koa from 'koa';
import { anthropicErrors } from '../../lib/errors/anthropic-errors.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { MemoryModelLimiter } from '../../lib/quota/memory-model-limiter.js';
import type { ModelLimitDecision, ModelLimits } from '../../lib/quota/model-limits.js';
import { goDuration, modelLimitRefusal, rateLimitHeaders, type RateLimitHeaderStyle } from '../../lib/quota/rate-limit-headers.js';
import { testClock } from '../../lib/testing/creation-limiter-contract.js';
import { listen } from '../helpers/http.js';

test("reset durations are written as OpenAI writes them (Go's duration text)", (t) => {
  const cases: Array<[number, string]> = [
    [0, '0s'],
    [12, '12ms'],
    [999.2, '1s'],
    [1000, '1s'],
    [17_500, '17.5s'],
    [44_700, '44.7s'],
    [360_000, '6m0s'],
    [252_172, '4m12.172s'],
    [3_600_000, '1h0m0s'],
    [85_656_648, '23h47m36.648s'],
  ];
  for (const [ms, text] of cases) t.is(goDuration(ms), text, String(ms));
});

/** A decision of a fresh limiter after `calls` calls and `tokens` tokens, at 12:00:15.300. */
async function decisionAfter(limits: ModelLimits, calls: number, tokens = 0): Promise<ModelLimitDecision> {
  const limiter = new MemoryModelLimiter({ nowMs: testClock('2030-01-15T12:00:15.300Z').nowMs });
  for (let i = 0; i < calls; i += 1) await limiter.consume('key_1', limits);
  await limiter.addTokens('key_1', limits, tokens);
  return limiter.consume('key_1', limits);
}

test('OpenAI style: x-ratelimit-limit, -remaining and -reset for requests and tokens', async (t) => {
  const decision = await decisionAfter({ requestsPerMinute: 60, tokensPerMinute: 150_000, tokensPerDay: 10_000_000 }, 1, 16);
  t.deepEqual(rateLimitHeaders(decision, 'openai'), {
    'x-ratelimit-limit-requests': '60',
    'x-ratelimit-remaining-requests': '58',
    'x-ratelimit-reset-requests': '44.7s',
    'x-ratelimit-limit-tokens': '150000',
    'x-ratelimit-remaining-tokens': '149984',
    'x-ratelimit-reset-tokens': '44.7s',
  });
});

test('Anthropic style: anthropic-ratelimit-*-limit, -remaining and an RFC 3339 -reset; the day window when it has fewer tokens left', async (t) => {
  const decision = await decisionAfter({ requestsPerMinute: 50, tokensPerMinute: 40_000, tokensPerDay: 1000 }, 0, 400);
  t.deepEqual(rateLimitHeaders(decision, 'anthropic'), {
    'anthropic-ratelimit-requests-limit': '50',
    'anthropic-ratelimit-requests-remaining': '49',
    'anthropic-ratelimit-requests-reset': '2030-01-15T12:01:00Z',
    'anthropic-ratelimit-tokens-limit': '1000',
    'anthropic-ratelimit-tokens-remaining': '600',
    'anthropic-ratelimit-tokens-reset': '2030-01-16T00:00:00Z',
  });
});

test('a key without limits gets no rate-limit headers; a dimension without a limit gets none of its own', async (t) => {
  t.deepEqual(rateLimitHeaders(await decisionAfter({}, 3), 'openai'), {});
  t.deepEqual(Object.keys(rateLimitHeaders(await decisionAfter({ tokensPerDay: 5 }, 0), 'anthropic')), [
    'anthropic-ratelimit-tokens-limit',
    'anthropic-ratelimit-tokens-remaining',
    'anthropic-ratelimit-tokens-reset',
  ]);
});

/** The answer of an app whose handler throws `modelLimitRefusal(decision, style)` behind the style's formatter. */
async function refusalAnswer(decision: ModelLimitDecision, style: RateLimitHeaderStyle) {
  const app = new Koa();
  app.use(style === 'openai' ? openAIErrors() : anthropicErrors());
  app.use(() => {
    throw modelLimitRefusal(decision, style);
  });
  const server = await listen(app);
  try {
    const res = await fetch(server.url, { method: 'POST' });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  } finally {
    await server.close();
  }
}

test('a refusal is a Shape A 429 rate_limit_exceeded naming the limit, with retry-after and the x-ratelimit headers', async (t) => {
  const refused = await decisionAfter({ requestsPerMinute: 3 }, 3);
  const answer = await refusalAnswer(refused, 'openai');
  t.is(answer.status, 429);
  t.deepEqual(answer.body, {
    error: { message: 'Rate limit exceeded: requests per minute', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' },
  });
  t.is(answer.headers.get('retry-after'), '45');
  t.is(answer.headers.get('x-ratelimit-remaining-requests'), '0');
  t.is(answer.headers.get('x-ratelimit-reset-requests'), '44.7s');
  t.regex(answer.headers.get('x-request-id') ?? '', /^req_/);
});

test('a refusal on Messages is a Shape B rate_limit_error with retry-after and the anthropic-ratelimit headers', async (t) => {
  const refused = await decisionAfter({ tokensPerDay: 100 }, 0, 150);
  const answer = await refusalAnswer(refused, 'anthropic');
  t.is(answer.status, 429);
  t.like(answer.body, { type: 'error', error: { type: 'rate_limit_error', message: 'Rate limit exceeded: tokens per day' } });
  t.is(answer.headers.get('retry-after'), String(Math.ceil((Date.parse('2030-01-16T00:00:00Z') - Date.parse('2030-01-15T12:00:15.300Z')) / 1000)));
  t.is(answer.headers.get('anthropic-ratelimit-tokens-remaining'), '0');
  t.is(answer.headers.get('anthropic-ratelimit-tokens-reset'), '2030-01-16T00:00:00Z');
});

test('modelLimitRefusal of a decision that passed is a TypeError (a bug in the caller)', async (t) => {
  const passed = await decisionAfter({ requestsPerMinute: 3 }, 0);
  t.throws(() => modelLimitRefusal(passed, 'openai'), { instanceOf: TypeError });
});
