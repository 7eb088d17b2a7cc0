import Anthropic from '@anthropic-ai/sdk';
import test from 'ava';
import OpenAI from 'openai';
import { spendBudgets } from '../../lib/cost/budgets.js';
import { MemorySpendLedger } from '../../lib/stores/memory/spend-ledger.js';
import { modelsApp } from '../helpers/models-app.js';

// A 429 that waiting will not cure soon says so: the official SDKs, at their default settings
// (two retries, each after the answer's retry-after), then raise at once instead of sleeping until
// the budget's period ends.

/** 12:00:30 UTC: a spent day's budget is 43,170 s from its end, a minute's limit 30 s. */
const NOON = Date.UTC(2030, 0, 15, 12, 0, 30);

async function spentBudgetApp() {
  const ledger = new MemorySpendLedger({ nowMs: () => NOON });
  await ledger.add(['account:acme'], 1_000_000_000_000);
  const budgets = spendBudgets({ ledger, accounts: { get: async () => ({ costPerDay: 1 }) } });
  return modelsApp({ budgets, nowMs: () => NOON });
}

/** A fetch that counts the requests an SDK makes. */
function countingFetch() {
  const counted = { requests: 0 };
  const fetching: typeof fetch = (input, init) => {
    counted.requests += 1;
    return fetch(input, init);
  };
  return { counted, fetch: fetching };
}

test('a spent budget: the openai SDK at its default settings raises the 429 at once, after one request', async (t) => {
  const app = await spentBudgetApp();
  t.teardown(() => app.close());
  const { counted, fetch } = countingFetch();
  const client = new OpenAI({ apiKey: await app.keyFor(), baseURL: `${app.url}/v1`, fetch });
  const err = await t.throwsAsync(client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }), {
    instanceOf: OpenAI.RateLimitError,
  });
  t.is(err?.headers.get('x-should-retry'), 'false');
  t.is(err?.headers.get('retry-after'), '43170');
  t.is(counted.requests, 1);
});

test('a spent budget: the @anthropic-ai/sdk at its default settings raises the 429 at once, after one request', async (t) => {
  const app = await spentBudgetApp();
  t.teardown(() => app.close());
  const { counted, fetch } = countingFetch();
  const client = new Anthropic({ apiKey: await app.keyFor(), baseURL: app.url, fetch });
  const err = await t.throwsAsync(client.messages.create({ model: 'claude-test', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }), {
    instanceOf: Anthropic.RateLimitError,
  });
  t.is(err?.headers.get('x-should-retry'), 'false');
  t.is(counted.requests, 1);
});

test('a 429 whose retry-after is a minute or less leaves the retry to the client: no x-should-retry', async (t) => {
  const app = await modelsApp({ nowMs: () => NOON });
  t.teardown(() => app.close());
  const key = await app.keyFor(undefined, { limits: { requestsPerMinute: 1 } });
  const call = () => app.post('/v1/chat/completions', { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${key}` });
  t.is((await call()).status, 200);
  const refused = await call();
  t.is(refused.status, 429);
  t.is(refused.headers.get('retry-after'), '30');
  t.is(refused.headers.get('x-should-retry'), null);
});

test('a 429 of a daily limit, hours from its end, says x-should-retry: false', async (t) => {
  const app = await modelsApp({ nowMs: () => NOON });
  t.teardown(() => app.close());
  const key = await app.keyFor(undefined, { limits: { tokensPerDay: 1 } });
  const call = () => app.post('/v1/chat/completions', { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${key}` });
  t.is((await call()).status, 200);
  const refused = await call();
  t.is(refused.status, 429);
  t.true(Number(refused.headers.get('retry-after')) > 60);
  t.is(refused.headers.get('x-should-retry'), 'false');
});
