import { randomBytes } from 'node:crypto';
import test from 'ava';
import { createGatewayMetrics, type GatewayMetrics } from '../../lib/metrics/gateway-metrics.js';
import { MemoryCooldownStore } from '../../lib/stores/memory/cooldown-store.js';
import type { RoutingOptions } from '../../lib/models/routing/routing-options.js';
import { MemoryModelLimiter } from '../../lib/stores/memory/model-limiter.js';
import { anthropicProvider } from '../../lib/models/providers/anthropic/index.js';
import { echoProvider } from '../../lib/models/providers/echo/index.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { createRedisClient } from '../../lib/stores/redis/client.js';
import { RedisCooldownStore } from '../../lib/stores/redis/cooldown-store.js';
import type { UsageRecord, UsageStore } from '../../lib/usage/usage-store.js';
import { modelsApp } from '../helpers/models-app.js';
import { referenceApp } from '../helpers/reference-app.js';
import { anthropicMessage, reply, scriptedUpstream, type UpstreamAnswer } from '../helpers/models-upstream.js';
import { until } from '../helpers/poll.js';
import { parseMetrics, value } from '../helpers/prometheus.js';
import { REDIS_URL, postgresDatabase, sqliteDatabase, withPostgres, withRedis, type TestDatabase } from '../helpers/services.js';

// Routing over deployments and fallbacks, the cooldown stores it keeps its failures in, and the
// usage record of a routed call in each usage store.

const redisClients: Array<{ quit(): Promise<unknown> }> = [];
const databases: TestDatabase[] = [];
test.after.always(() => Promise.all([...redisClients.map((client) => client.quit()), ...databases.map((db) => db.destroy())]));

const CHAT = '/v1/chat/completions';
const completion = (content: string) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1,
  model: 'up',
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
});
const ask = { model: 'smart', messages: [{ role: 'user', content: 'hi' }] };
const overloaded = reply(503, { error: { message: 'overloaded' } });

/** A seeded source of numbers in [0, 1) (mulberry32): the same sequence on every run. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let x = Math.imul(state ^ (state >>> 15), 1 | state);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A clock that only moves when told, and a `sleep` that moves it: no test waits on a timer. */
function testTime(start = Date.now()) {
  const time = { now: start, waits: [] as number[] };
  return {
    time,
    nowMs: () => time.now,
    sleep: async (ms: number) => {
      time.waits.push(ms);
      time.now += ms;
    },
  };
}

/** Two OpenAI deployments of `smart` ("east" first, as `random: () => 0` picks), each a scripted upstream. */
async function twoDeployments(
  t: { teardown(fn: () => unknown): void },
  routing: RoutingOptions = {},
  extra: { usage?: UsageRecord[]; timeoutMs?: number; maxUpstreamBytes?: number; metrics?: GatewayMetrics } = {},
) {
  const [east, west] = await Promise.all([scriptedUpstream(), scriptedUpstream()]);
  const clock = testTime();
  const app = await modelsApp({
    catalog: [
      {
        id: 'smart',
        deployments: [
          { provider: 'east', upstreamModel: 'gpt-east' },
          { provider: 'west', upstreamModel: 'gpt-west' },
        ],
      },
    ],
    providers: [openAIProvider({ id: 'east', baseURL: `${east.url}/v1` }), openAIProvider({ id: 'west', baseURL: `${west.url}/v1` })],
    nowMs: clock.nowMs,
    // Request limits count per minute of the test's clock: a run never straddles two.
    modelLimiter: new MemoryModelLimiter({ nowMs: clock.nowMs }),
    routing: { random: () => 0, sleep: clock.sleep, ...routing },
    ...(extra.timeoutMs !== undefined && { timeoutMs: extra.timeoutMs }),
    ...(extra.maxUpstreamBytes !== undefined && { maxUpstreamBytes: extra.maxUpstreamBytes }),
    ...(extra.usage && { usageRecorder: { record: (record: UsageRecord) => extra.usage?.push(record) } }),
    ...(extra.metrics && { metrics: extra.metrics }),
  });
  t.teardown(() => Promise.all([app.close(), east.close(), west.close()]));
  const key = await app.keyFor();
  const chat = (body: unknown = ask) => app.post(CHAT, body, { authorization: `Bearer ${key}` });
  return { app, east, west, clock, chat, key };
}

test('calls are spread over the deployments by weight (3:1, within ±10% over 1,000 calls)', async (t) => {
  const app = await modelsApp({
    catalog: [
      {
        id: 'smart',
        deployments: [
          { provider: 'east', weight: 3 },
          { provider: 'west', weight: 1 },
        ],
      },
    ],
    providers: [echoProvider({ id: 'east' }), echoProvider({ id: 'west' })],
    routing: { random: seeded(28) },
  });
  t.teardown(() => app.close());
  const key = await app.keyFor();
  const count = { east: 0, west: 0 };
  for (let call = 0; call < 1000; call++) {
    const answer = await app.post(CHAT, ask, { authorization: `Bearer ${key}` });
    await answer.arrayBuffer();
    count[answer.headers.get('x-kmg-deployment') as 'east' | 'west']++;
  }
  t.true(Math.abs(count.east - 750) <= 75, `east answered ${count.east} of 1,000`);
  t.is(count.east + count.west, 1000);
});

test('a 503 is retried on the other deployment: the client gets its answer, and headers say so', async (t) => {
  const usage: UsageRecord[] = [];
  const { east, west, chat } = await twoDeployments(t, {}, { usage });
  east.answer(CHAT, overloaded);
  west.answer(CHAT, reply(200, completion('from west')));
  const answer = await chat();
  t.is(answer.status, 200);
  t.is(answer.headers.get('x-kmg-attempts'), '2');
  t.is(answer.headers.get('x-kmg-deployment'), 'west');
  t.like(await answer.json(), { model: 'smart', choices: [{ message: { content: 'from west' } }] });
  t.is(west.received[0]?.body.model, 'gpt-west');
  await until(
    async () => usage.length,
    (length) => length === 1,
  );
  t.like(usage[0], { provider: 'west', upstreamModel: 'gpt-west', attempts: 2, status: 200, inputTokens: 3, outputTokens: 2 });
});

test('every retried status (408, 429, 500, 502, 503, 504, 529) is retried on the other deployment; another 4xx is not', async (t) => {
  // A new pair of deployments each: the failures of one case never cool a deployment down for the next.
  for (const status of [408, 429, 500, 502, 503, 504, 529]) {
    const { east, west, chat } = await twoDeployments(t);
    east.answer(CHAT, reply(status, { error: { message: `east answered ${status}` } }));
    west.answer(CHAT, reply(200, completion('from west')));
    const answer = await chat();
    t.deepEqual([answer.status, answer.headers.get('x-kmg-attempts'), answer.headers.get('x-kmg-deployment')], [200, '2', 'west'], `after a ${status}`);
    await answer.arrayBuffer();
  }
  // The client's own request: a refusal it may correct passes as it is, any other is the gateway's 502.
  for (const [status, passed] of [
    [400, 400],
    [401, 502],
    [403, 502],
    [404, 502],
    [409, 502],
    [422, 422],
  ] as const) {
    const { east, west, chat } = await twoDeployments(t);
    east.answer(CHAT, reply(status, { error: { message: `east refused with ${status}`, type: 'invalid_request_error', code: null } }));
    const answer = await chat();
    t.deepEqual([answer.status, answer.headers.get('x-kmg-attempts'), answer.headers.get('x-kmg-deployment')], [passed, '1', 'east'], `a ${status}`);
    const body = await answer.json();
    if (passed === status) t.like(body, { error: { message: `east refused with ${status}` } }, `a ${status}`);
    t.is(west.received.length, 0, `nothing retried after a ${status}`);
  }
});

test('a refused connection is retried on the other deployment', async (t) => {
  const west = await scriptedUpstream();
  // Port 1, where nothing listens: a port freed for the test may be taken by another server of the
  // suite before the call, and answer (a run saw the first attempt succeed).
  const app = await modelsApp({
    catalog: [{ id: 'smart', deployments: [{ provider: 'gone' }, { provider: 'west' }] }],
    providers: [openAIProvider({ id: 'gone', baseURL: 'http://127.0.0.1:1/v1' }), openAIProvider({ id: 'west', baseURL: `${west.url}/v1` })],
    routing: { random: () => 0, sleep: async () => undefined },
  });
  t.teardown(() => Promise.all([app.close(), west.close()]));
  west.answer(CHAT, reply(200, completion('ok')));
  const answer = await app.post(CHAT, ask, { authorization: `Bearer ${await app.keyFor()}` });
  t.is(answer.status, 200);
  t.is(answer.headers.get('x-kmg-attempts'), '2');
});

test("a 429's retry-after is waited for before the same deployment is tried again, up to the cap", async (t) => {
  const upstream = await scriptedUpstream();
  const clock = testTime();
  const app = await modelsApp({
    catalog: [{ id: 'smart', provider: 'one' }],
    providers: [openAIProvider({ id: 'one', baseURL: `${upstream.url}/v1` })],
    nowMs: clock.nowMs,
    routing: { random: () => 0, sleep: clock.sleep, retryAfterCapMs: 5_000 },
  });
  t.teardown(() => Promise.all([app.close(), upstream.close()]));
  upstream.answer(CHAT, reply(429, { error: { message: 'slow down' } }, { 'retry-after': '2' }));
  upstream.answer(CHAT, reply(429, { error: { message: 'slow down' } }, { 'retry-after-ms': '60000' }));
  upstream.answer(CHAT, reply(200, completion('at last')));
  const answer = await app.post(CHAT, ask, { authorization: `Bearer ${await app.keyFor()}` });
  t.is(answer.status, 200);
  t.is(answer.headers.get('x-kmg-attempts'), '3');
  t.deepEqual(clock.time.waits, [2_000, 5_000]);
});

test('a 400 is not retried; the last failure reaches the client with the attempt count', async (t) => {
  const { east, west, chat } = await twoDeployments(t);
  east.answer(CHAT, reply(400, { error: { message: 'bad request shape' } }));
  const refused = await chat();
  t.is(refused.status, 400);
  t.is(refused.headers.get('x-kmg-attempts'), '1');
  t.is(west.received.length, 0);

  east.answer(CHAT, overloaded);
  west.answer(CHAT, reply(529, { error: { message: 'overloaded' } }));
  east.answer(CHAT, overloaded);
  const failed = await chat();
  t.is(failed.status, 502);
  t.is(failed.headers.get('x-kmg-attempts'), '3');
});

test('an upstream that hangs before its headers is given up on and the call retried', async (t) => {
  // West's answer must beat the same timeout: on a busy machine that can take seconds.
  const { east, west, chat } = await twoDeployments(t, {}, { timeoutMs: 5_000 });
  east.answer(CHAT, () => undefined);
  west.answer(CHAT, reply(200, completion('ok')));
  const answer = await chat();
  t.is(answer.status, 200);
  t.is(answer.headers.get('x-kmg-deployment'), 'west');
});

test('the reference server: upstreamTimeoutMs bounds each attempt, so a silent deployment is given up on and the fallback answers within routing.budgetMs', async (t) => {
  const [silent, answering] = await Promise.all([scriptedUpstream(), scriptedUpstream()]);
  // Without it, the first attempt's silence limit would be the whole budget: nothing retried.
  const app = await referenceApp({
    upstreamTimeoutMs: 5_000,
    routing: { budgetMs: 120_000 },
    providers: [
      { id: 'silent', kind: 'openai', baseURL: `${silent.url}/v1` },
      { id: 'answering', kind: 'openai', baseURL: `${answering.url}/v1` },
    ],
    models: [
      { id: 'smart', provider: 'silent', fallbacks: ['backup'] },
      { id: 'backup', provider: 'answering' },
    ],
  });
  t.teardown(() => Promise.all([app.close(), silent.close(), answering.close()]));
  silent.answer(CHAT, () => undefined);
  answering.answer(CHAT, reply(200, completion('ok')));
  const answer = await fetch(`${app.url}${CHAT}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await app.keyFor()}`, 'content-type': 'application/json' },
    body: JSON.stringify(ask),
    // A guard below AVA's 60 s and far above the 5 s of the silent attempt: without the setting, the call would wait out the budget.
    signal: AbortSignal.timeout(45_000),
  });
  t.is(answer.status, 200);
  t.is(answer.headers.get('x-kmg-attempts'), '2');
  t.is(answer.headers.get('x-kmg-deployment'), 'answering');
});

const chunk = (content: string) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'up', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const diesAfter =
  (events: string): UpstreamAnswer =>
  (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(events, () => setImmediate(() => res.destroy()));
  };

test('a stream that fails before its first event is retried; one that fails after it ends with an error event', async (t) => {
  const { east, west, chat } = await twoDeployments(t);
  east.answer(CHAT, diesAfter(''));
  west.answer(CHAT, (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(`${chunk('from west')}data: [DONE]\n\n`);
  });
  const retried = await chat({ ...ask, stream: true });
  t.is(retried.status, 200);
  t.is(retried.headers.get('x-kmg-attempts'), '2');
  t.regex(await retried.text(), /from west/);

  east.answer(CHAT, diesAfter(chunk('Hel')));
  const broken = await chat({ ...ask, stream: true });
  t.is(broken.status, 200);
  t.is(broken.headers.get('x-kmg-attempts'), '1');
  const text = await broken.text();
  t.regex(text, /Hel/);
  t.regex(text, /"error"/);
  t.is(west.received.length, 1, 'nothing retried after the first event');
});

test('a deployment is skipped after its third failure, and tried again once its cooldown is over', async (t) => {
  const { east, west, chat, clock } = await twoDeployments(t, { cooldown: { store: new MemoryCooldownStore() } });
  for (let call = 0; call < 3; call++) {
    east.answer(CHAT, overloaded);
    west.answer(CHAT, reply(200, completion('west')));
    t.is((await chat()).headers.get('x-kmg-attempts'), '2');
  }
  west.answer(CHAT, reply(200, completion('west')));
  const skipping = await chat();
  t.is(skipping.headers.get('x-kmg-attempts'), '1');
  t.is(skipping.headers.get('x-kmg-deployment'), 'west');
  t.is(east.received.length, 3);

  clock.time.now += 30_000;
  east.answer(CHAT, reply(200, completion('east')));
  const back = await chat();
  t.is(back.headers.get('x-kmg-deployment'), 'east');
  t.is(back.headers.get('x-kmg-attempts'), '1');
});

test('attempts, cooldowns and the deployments cooling down are metrics', async (t) => {
  const metrics = createGatewayMetrics();
  const { east, west, chat } = await twoDeployments(t, { cooldown: { failures: 1, seconds: 3600 } }, { metrics });
  east.answer(CHAT, overloaded);
  west.answer(CHAT, reply(200, completion('west')));
  await (await chat()).arrayBuffer();
  west.answer(CHAT, reply(200, completion('west')));
  await (await chat()).arrayBuffer();
  const samples = await until(
    async () => parseMetrics(await metrics.registry.metrics()),
    (found) => value(found, 'kmg_upstream_attempts_total', { provider: 'west' }) === 2,
  );
  t.is(value(samples, 'kmg_upstream_attempts_total', { provider: 'east', model: 'smart', outcome: 'failed' }), 1);
  t.is(value(samples, 'kmg_upstream_attempts_total', { provider: 'west', model: 'smart', outcome: 'ok' }), 2);
  t.is(value(samples, 'kmg_deployment_cooldowns_total', { provider: 'east' }), 1);
  t.is(value(samples, 'kmg_deployments_cooling_down'), 1);
});

test('when every deployment cools down, the one that comes back first is tried', async (t) => {
  // random 0.5: west first, and a wait of 50 ms before east: west's cooldown ends first.
  const { east, west, chat, clock } = await twoDeployments(t, { maxAttempts: 2, random: () => 0.5, cooldown: { failures: 1, seconds: 30 } });
  east.answer(CHAT, overloaded);
  west.answer(CHAT, overloaded);
  t.is((await chat()).status, 502);
  t.deepEqual(clock.time.waits, [50]);
  west.answer(CHAT, reply(200, completion('west')));
  const answer = await chat();
  t.is(answer.status, 200);
  t.is(answer.headers.get('x-kmg-deployment'), 'west');
  t.is(answer.headers.get('x-kmg-attempts'), '1');
  t.is(east.received.length, 1);
});

withRedis(test)('two gateways on one Redis: a cooldown one learned is honoured by the other', async (t) => {
  const keyPrefix = `kmg-test:${randomBytes(6).toString('hex')}`;
  const store = async () => {
    const client = await createRedisClient(REDIS_URL);
    redisClients.push(client);
    return new RedisCooldownStore({ client, keyPrefix });
  };
  const [east, west] = await Promise.all([scriptedUpstream(), scriptedUpstream()]);
  t.teardown(() => Promise.all([east.close(), west.close()]));
  const gateway = async () => {
    const app = await modelsApp({
      catalog: [{ id: 'smart', deployments: [{ provider: 'east' }, { provider: 'west' }] }],
      providers: [openAIProvider({ id: 'east', baseURL: `${east.url}/v1` }), openAIProvider({ id: 'west', baseURL: `${west.url}/v1` })],
      routing: { random: () => 0, sleep: async () => undefined, cooldown: { failures: 1, store: await store() } },
    });
    t.teardown(() => app.close());
    const key = await app.keyFor();
    return () => app.post(CHAT, ask, { authorization: `Bearer ${key}` });
  };
  const [first, second] = [await gateway(), await gateway()];
  east.answer(CHAT, overloaded);
  west.answer(CHAT, reply(200, completion('west')));
  t.is((await first()).headers.get('x-kmg-attempts'), '2');
  west.answer(CHAT, reply(200, completion('west')));
  const answer = await second();
  t.is(answer.headers.get('x-kmg-attempts'), '1');
  t.is(answer.headers.get('x-kmg-deployment'), 'west');
  t.is(east.received.length, 1);
});

test("a call counts once against the key's request limit, however many attempts it took", async (t) => {
  const { app, east, west } = await twoDeployments(t);
  const key = await app.keyFor(undefined, { limits: { requestsPerMinute: 2 } });
  const chat = () => app.post(CHAT, ask, { authorization: `Bearer ${key}` });
  for (let call = 0; call < 2; call++) {
    east.answer(CHAT, overloaded);
    west.answer(CHAT, reply(200, completion('west')));
    const answer = await chat();
    t.is(answer.status, 200);
    t.is(answer.headers.get('x-kmg-attempts'), '2');
  }
  t.is((await chat()).status, 429);
});

test("a fallback model of the other format answers in the client's format; it needs no allowlist entry", async (t) => {
  const [anthropic, openai] = await Promise.all([scriptedUpstream(), scriptedUpstream()]);
  const app = await modelsApp({
    catalog: [
      { id: 'claude-x', provider: 'anthropic', fallbacks: ['gpt-x'] },
      { id: 'gpt-x', provider: 'openai', upstreamModel: 'gpt-up' },
    ],
    providers: [anthropicProvider({ id: 'anthropic', baseURL: anthropic.url }), openAIProvider({ id: 'openai', baseURL: `${openai.url}/v1` })],
    routing: { random: () => 0, sleep: async () => undefined },
  });
  t.teardown(() => Promise.all([app.close(), anthropic.close(), openai.close()]));
  anthropic.answer('/v1/messages', reply(529, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
  openai.answer(CHAT, reply(200, completion('from the fallback')));
  const key = await app.keyFor(undefined, { models: ['claude-x'] });
  const answer = await app.post(
    '/v1/messages',
    { model: 'claude-x', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] },
    { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
  );
  t.is(answer.status, 200);
  t.is(answer.headers.get('x-kmg-deployment'), 'openai');
  t.like(await answer.json(), { type: 'message', model: 'claude-x', content: [{ type: 'text', text: 'from the fallback' }] });
  t.is(openai.received[0]?.body.model, 'gpt-up');
  // The allowlist applies to the model the client named: gpt-x is not callable by itself.
  t.is((await app.post(CHAT, { ...ask, model: 'gpt-x' }, { authorization: `Bearer ${key}` })).status, 403);
});

test("a call a fallback answered costs the fallback's tokens at the fallback's price, in its usage record", async (t) => {
  const [cheap, dear] = await Promise.all([scriptedUpstream(), scriptedUpstream()]);
  const usage: UsageRecord[] = [];
  const app = await modelsApp({
    catalog: [
      { id: 'cheap', provider: 'cheap', upstreamModel: 'gpt-cheap', price: { input: 1, output: 2 }, fallbacks: ['dear'] },
      { id: 'dear', provider: 'dear', upstreamModel: 'gpt-dear', price: { input: 100, output: 200 } },
    ],
    providers: [openAIProvider({ id: 'cheap', baseURL: `${cheap.url}/v1` }), openAIProvider({ id: 'dear', baseURL: `${dear.url}/v1` })],
    routing: { random: () => 0, sleep: async () => undefined },
    usageRecorder: { record: (record: UsageRecord) => usage.push(record) },
  });
  t.teardown(() => Promise.all([app.close(), cheap.close(), dear.close()]));
  cheap.answer(CHAT, overloaded);
  dear.answer(CHAT, reply(200, { ...completion('dearly'), usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } }));
  const answer = await app.post(CHAT, { ...ask, model: 'cheap' }, { authorization: `Bearer ${await app.keyFor()}` });
  t.is(answer.status, 200);
  t.is(answer.headers.get('x-kmg-deployment'), 'dear');
  await answer.arrayBuffer();
  await until(
    async () => usage.length,
    (length) => length === 1,
  );
  // 3 × 100 + 1 × 200 millionths of a dollar: 500 µUSD, in picodollars. At the named model's price it would be 5 µUSD.
  t.like(usage[0], { model: 'cheap', provider: 'dear', upstreamModel: 'gpt-dear', attempts: 2, inputTokens: 3, outputTokens: 1, costPicoUsd: 500_000_000 });
});

test('the attempts and the waits between them stay within budgetMs', async (t) => {
  const upstream = await scriptedUpstream();
  const clock = testTime();
  const app = await modelsApp({
    catalog: [{ id: 'smart', provider: 'one' }],
    providers: [openAIProvider({ id: 'one', baseURL: `${upstream.url}/v1` })],
    nowMs: clock.nowMs,
    // The waits pass on the test's clock, but what is left of the budget bounds each attempt's
    // silence in real time: the third attempt has 11 s, far more than a 503 takes on a busy machine.
    routing: { maxAttempts: 10, budgetMs: 20_000, backoff: { baseMs: 3_000, maxMs: 60_000 }, random: () => 0.99, sleep: clock.sleep },
  });
  t.teardown(() => Promise.all([app.close(), upstream.close()]));
  upstream.answer(CHAT, overloaded, 10);
  const started = clock.time.now;
  const answer = await app.post(CHAT, ask, { authorization: `Bearer ${await app.keyFor()}` });
  t.is(answer.status, 502);
  // Waits of 2,970 and 5,940 ms fit; the next (11,880) would not.
  t.deepEqual(clock.time.waits, [2_970, 5_940]);
  t.is(answer.headers.get('x-kmg-attempts'), '3');
  t.true(clock.time.now - started <= 20_000);
});

test('a JSON answer that breaks before its end (reset, not JSON, silent after its headers) is retried on the other deployment, and counts towards a cooldown', async (t) => {
  // West's answer must beat the silence limit of east's silent answer: on a busy machine that can take a second.
  const { east, west, chat } = await twoDeployments(t, {}, { timeoutMs: 2_000 });
  const broken: Array<[string, UpstreamAnswer]> = [
    [
      'reset mid-body',
      (res) => res.writeHead(200, { 'content-type': 'application/json' }).write('{"id":"chatcmpl-1","choi', () => setImmediate(() => res.destroy())),
    ],
    ['not JSON', reply(200, '<html>Bad gateway</html>')],
    ['silent after its headers', (res) => res.writeHead(200, { 'content-type': 'application/json' }).flushHeaders()],
  ];
  for (const [what, answer] of broken) {
    east.answer(CHAT, answer);
    west.answer(CHAT, reply(200, completion('from west')));
    const answered = await chat();
    t.deepEqual([answered.status, answered.headers.get('x-kmg-attempts'), answered.headers.get('x-kmg-deployment')], [200, '2', 'west'], what);
    t.like(await answered.json(), { choices: [{ message: { content: 'from west' } }] }, what);
  }
  // The third failure in 10 s: east cools down, and the next call goes to west at once.
  west.answer(CHAT, reply(200, completion('from west')));
  const skipping = await chat();
  t.deepEqual([skipping.headers.get('x-kmg-attempts'), skipping.headers.get('x-kmg-deployment')], ['1', 'west']);
  t.is(east.received.length, 3);
});

/**
 * A 200 that sends `first`, then `drop` every 200 ms, for 10 s at most, and then `last`: an upstream
 * that is never silent long, and may never finish. Its timers end with its connection.
 */
const drips =
  (contentType: string, first: string, drop: string, last: string, everyMs = 200, forMs = 10_000): UpstreamAnswer =>
  (res) => {
    res.writeHead(200, { 'content-type': contentType });
    res.write(first);
    const dripping = setInterval(() => res.write(drop), everyMs);
    const ending = setTimeout(() => res.end(last), forMs);
    res.once('close', () => {
      clearInterval(dripping);
      clearTimeout(ending);
    });
  };

test('an answer that drips a byte every 200 ms is given up on when it is not whole within the bound, JSON or stream, and the other deployment answers', async (t) => {
  const json = await twoDeployments(t, {}, { timeoutMs: 1_500 });
  json.east.answer(CHAT, drips('application/json', '{"id":"chatcmpl-1"', ' ', ',"object":"chat.completion","created":1,"model":"up","choices":[]}'));
  json.west.answer(CHAT, reply(200, completion('from west')));
  const streamed = await twoDeployments(t, {}, { timeoutMs: 1_500 });
  // Lines of a comment that never end the event: nothing for the client, ever.
  streamed.east.answer(CHAT, drips('text/event-stream', ': waiting\n', ': still waiting\n', `\n${chunk('from east')}data: [DONE]\n\n`));
  streamed.west.answer(CHAT, (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(`${chunk('from west')}data: [DONE]\n\n`);
  });
  const [whole, stream] = await Promise.all([json.chat(), streamed.chat({ ...ask, stream: true })]);
  t.deepEqual([whole.status, whole.headers.get('x-kmg-attempts'), whole.headers.get('x-kmg-deployment')], [200, '2', 'west']);
  t.like(await whole.json(), { choices: [{ message: { content: 'from west' } }] });
  t.deepEqual([stream.status, stream.headers.get('x-kmg-attempts'), stream.headers.get('x-kmg-deployment')], [200, '2', 'west']);
  t.regex(await stream.text(), /from west/);
});

test('with a budget, an answer dripping past it is a 504; one dripping within it is not cut by the silence limit, translated or not', async (t) => {
  const upstream = await scriptedUpstream();
  const app = await modelsApp({
    catalog: [
      { id: 'smart', provider: 'openai' },
      { id: 'claude-x', provider: 'anthropic' },
    ],
    providers: [openAIProvider({ id: 'openai', baseURL: `${upstream.url}/v1` }), anthropicProvider({ id: 'anthropic', baseURL: upstream.url })],
    timeoutMs: 1_000,
    // Room for a busy machine: the translated answer drips for 1.5 s of a 6 s budget, a byte every 100 ms of a 1 s silence limit.
    routing: { budgetMs: 6_000, sleep: async () => undefined },
  });
  t.teardown(() => Promise.all([app.close(), upstream.close()]));
  const key = await app.keyFor();
  const chat = (body: unknown) => app.post(CHAT, body, { authorization: `Bearer ${key}` });
  // Whitespace every 100 ms for 1.5 s, longer than the silence limit, then the answer: a Chat client on a Messages model.
  upstream.answer('/v1/messages', drips('application/json', '', ' ', JSON.stringify(anthropicMessage('dripped')), 100, 1_500));
  // The same for 20 s: past the budget, whatever the silence.
  upstream.answer(CHAT, drips('application/json', '', ' ', JSON.stringify(completion('too late')), 200, 20_000));
  const [translated, late] = await Promise.all([chat({ ...ask, model: 'claude-x' }), chat(ask)]);
  t.is(translated.status, 200);
  t.like(await translated.json(), { model: 'claude-x', choices: [{ message: { content: 'dripped' } }] });
  t.is(late.status, 504);
  // Cut by the budget: whole, its answer would have been a 200 after 20 s.
  t.like(await late.json(), { error: { code: 'upstream_timeout' } });
});

test('once its first event reached the client, a stream that keeps sending events is not cut by the bound on its start', async (t) => {
  const { east, chat } = await twoDeployments(t, {}, { timeoutMs: 1_000 });
  // An event every 200 ms for 2 s: twice the bound, never silent for long.
  east.answer(CHAT, drips('text/event-stream', chunk('first'), chunk('more'), 'data: [DONE]\n\n', 200, 2_000));
  const answer = await chat({ ...ask, stream: true });
  t.is(answer.status, 200);
  const text = await answer.text();
  t.regex(text, /first/);
  t.regex(text, /\[DONE\]/);
  t.notRegex(text, /"error"/);
});

test('an answer over maxUpstreamBytes is refused with a 502 naming the limit: a JSON answer, translated or not, or an event of a stream', async (t) => {
  const { east, west, chat } = await twoDeployments(t, { maxAttempts: 2 }, { maxUpstreamBytes: 10_000 });
  const large = completion('x'.repeat(20_000));
  east.answer(CHAT, reply(200, large));
  west.answer(CHAT, reply(200, large));
  const whole = await chat();
  t.deepEqual([whole.status, whole.headers.get('x-kmg-attempts')], [502, '2']);
  t.like(await whole.json(), { error: { code: 'upstream_error', message: "Upstream provider error: its answer is over the gateway's limit of 10000 bytes" } });

  // Before the first event, as a failed attempt; after it, as the stream's error event.
  east.answer(CHAT, (res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(chunk('x'.repeat(20_000))));
  west.answer(CHAT, (res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(`${chunk('small')}${chunk('y'.repeat(20_000))}data: [DONE]\n\n`));
  const stream = await chat({ ...ask, stream: true });
  t.deepEqual([stream.status, stream.headers.get('x-kmg-attempts')], [200, '2']);
  const text = await stream.text();
  t.regex(text, /small/);
  t.regex(text, /"error".*limit of 10000 bytes/);
  t.notRegex(text, /yyyy/);

  const upstream = await scriptedUpstream();
  const translated = await modelsApp({
    catalog: [{ id: 'claude-x', provider: 'anthropic' }],
    providers: [anthropicProvider({ id: 'anthropic', baseURL: upstream.url })],
    maxUpstreamBytes: 10_000,
  });
  t.teardown(() => Promise.all([translated.close(), upstream.close()]));
  upstream.answer('/v1/messages', reply(200, anthropicMessage('x'.repeat(20_000))));
  upstream.answer('/v1/messages', (res) =>
    res
      .writeHead(200, { 'content-type': 'text/event-stream' })
      .end(`event: message_start\ndata: {"type":"message_start","padding":"${'x'.repeat(20_000)}"}\n\n`),
  );
  const key = await translated.keyFor();
  for (const stream of [false, true]) {
    const refused = await translated.post(CHAT, { ...ask, model: 'claude-x', stream }, { authorization: `Bearer ${key}` });
    t.is(refused.status, 502, `stream: ${stream}`);
    t.like(await refused.json(), { error: { message: "Upstream provider error: its answer is over the gateway's limit of 10000 bytes" } });
  }
});

test("a 429's retry-after cools a deployment down for 5 minutes at most, however long it asks", async (t) => {
  const { east, west, chat, clock } = await twoDeployments(t, { cooldown: { failures: 1 } });
  // 999,999,999 s: 31.7 years.
  east.answer(CHAT, reply(429, { error: { message: 'slow down' } }, { 'retry-after': '999999999' }));
  west.answer(CHAT, reply(200, completion('west')));
  t.is((await chat()).headers.get('x-kmg-attempts'), '2');
  clock.time.now += 299_000;
  west.answer(CHAT, reply(200, completion('west')));
  t.is((await chat()).headers.get('x-kmg-deployment'), 'west', 'still cooling down after 299 s');
  clock.time.now += 1_000;
  east.answer(CHAT, reply(200, completion('east')));
  t.is((await chat()).headers.get('x-kmg-deployment'), 'east', 'back after 300 s');
});

// A routed call's usage record, in each usage store.
async function knexStore(open: () => Promise<TestDatabase>): Promise<UsageStore> {
  const db = await open();
  databases.push(db);
  await migrate(db.knex);
  return new KnexUsageStore(db.knex);
}

const routed: UsageRecord = {
  time: Date.parse('2026-11-25T12:00:00Z'),
  requestId: 'req_00000000000000000000000000000028',
  keyId: 'key_a',
  account: 'acme',
  endpoint: '/v1/chat/completions',
  model: 'smart',
  provider: 'openai-west',
  upstreamModel: 'gpt-4.1',
  attempts: 2,
  status: 200,
  stream: false,
  inputTokens: 3,
  outputTokens: 2,
  attachments: 0,
  latencyMs: 12,
  upstreamFirstByteMs: 4,
  upstreamMs: 9,
  costPicoUsd: 0,
};

for (const [name, make, gate] of [
  ['memory', async () => new MemoryUsageStore(), test],
  ['sqlite', () => knexStore(() => sqliteDatabase()), test],
  ['postgres', () => knexStore(postgresDatabase), withPostgres(test)],
] as const) {
  gate(`${name}: a routed call's record keeps the upstream model that answered and its attempts`, async (t) => {
    const store = await make();
    await store.insert([routed]);
    t.like(await store.list(), [{ provider: 'openai-west', upstreamModel: 'gpt-4.1', attempts: 2 }]);
  });
}
