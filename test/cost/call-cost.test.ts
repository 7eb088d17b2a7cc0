import test from 'ava';
import { callCost, tokenPrice } from '../../lib/cost/price.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { catalogProviders, modelsApp } from '../helpers/models-app.js';
import { mockProviders } from '../helpers/models-upstream.js';
import { until } from '../helpers/poll.js';

const GPT = { input: 0.15, output: 0.6, cacheRead: 0.075 };
const CLAUDE = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 };

async function pricedApp() {
  const upstream = await mockProviders();
  const records: UsageRecord[] = [];
  const app = await modelsApp({
    catalog: [
      { id: 'gpt-test', provider: 'openai', upstreamModel: 'gpt-4o-mini', price: GPT },
      { id: 'claude-test', provider: 'anthropic', upstreamModel: 'claude-sonnet-4', price: CLAUDE },
    ],
    providers: catalogProviders(upstream.url),
    usageRecorder: { record: (record) => records.push(record) },
  });
  return { upstream, records, app, close: () => Promise.all([app.close(), upstream.close()]) };
}

const CALLS = [
  { endpoint: '/v1/chat/completions', model: 'gpt-test', body: { messages: [{ role: 'user', content: 'hi' }] }, headers: {} },
  { endpoint: '/v1/responses', model: 'gpt-test', body: { input: 'hi' }, headers: {} },
  { endpoint: '/v1/messages', model: 'claude-test', body: { max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }, headers: { 'anthropic-version': '2023-06-01' } },
  // Translated: each model called in the other provider's format.
  { endpoint: '/v1/chat/completions', model: 'claude-test', body: { max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }, headers: {} },
  { endpoint: '/v1/messages', model: 'gpt-test', body: { max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }, headers: { 'anthropic-version': '2023-06-01' } },
] as const;

for (const { endpoint, model, body, headers } of CALLS) {
  test(`${endpoint} on ${model}: a streamed call and a whole one each cost their upstream's reported tokens at the model's price`, async (t) => {
    const { upstream, records, app, close } = await pricedApp();
    t.teardown(close);
    const key = await app.keyFor();
    for (const stream of [false, true]) {
      const response = await app.post(endpoint, { model, ...body, stream }, { authorization: `Bearer ${key}`, ...headers });
      t.is(response.status, 200);
      await response.text();
      const record = await until(async () => records.find((each) => each.stream === stream), (found) => found !== undefined);
      const reported = upstream.calls.at(-1)?.usage ?? { input: 0, output: 0 };
      // The mock's Messages answers hold 1 cache write and 2 cache reads among their input.
      const expected =
        model === 'claude-test'
          ? callCost(tokenPrice(CLAUDE), { inputTokens: reported.input, outputTokens: reported.output, cacheWriteTokens: 1, cacheReadTokens: 2 })
          : callCost(tokenPrice(GPT), { inputTokens: reported.input, outputTokens: reported.output });
      t.true(expected > 0);
      t.like(record, { stream, inputTokens: reported.input, outputTokens: reported.output, costPicoUsd: expected });
    }
  });
}

test('cached input tokens OpenAI reports in its details are charged at the cache price', async (t) => {
  const { chatCompletionsAnswer } = await import('../../lib/models/formats/chat-completions/answer-format.js');
  const { responsesAnswer } = await import('../../lib/models/formats/responses/answer-format.js');
  const chat = chatCompletionsAnswer.json({ usage: { prompt_tokens: 1000, completion_tokens: 10, prompt_tokens_details: { cached_tokens: 800 } } }, 'm');
  const responses = responsesAnswer.json({ usage: { input_tokens: 1000, output_tokens: 10, input_tokens_details: { cached_tokens: 800 } } }, 'm');
  for (const usage of [chat, responses]) {
    t.deepEqual(usage, { inputTokens: 1000, outputTokens: 10, cacheReadTokens: 800 });
    // 200 × 0.15 + 800 × 0.075 + 10 × 0.6 microdollars.
    t.is(callCost(tokenPrice(GPT), usage), (200 * 0.15 + 800 * 0.075 + 10 * 0.6) * 1_000_000);
  }
});

test('a call its key\'s budget refuses sends nothing upstream and costs nothing', async (t) => {
  const { upstream, records, app, close } = await pricedApp();
  t.teardown(close);
  // Less than one call's worth: the first call reaches it.
  const key = await app.keyFor(undefined, { limits: { costPerDay: 0.000001 } });
  const call = () => app.post('/v1/chat/completions', { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${key}` });
  t.is((await call()).status, 200);
  const refused = await call();
  t.is(refused.status, 429);
  t.like(await refused.json(), { error: { type: 'rate_limit_error', code: 'budget_exceeded' } });
  t.is(upstream.calls.length, 1);
  const record = await until(async () => records.find((each) => each.status === 429), (found) => found !== undefined);
  t.like(record, { costPicoUsd: 0, upstreamMs: null });
});
