import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import Anthropic from '@anthropic-ai/sdk';
import { fc, testProp } from '@fast-check/ava';
import anyTest, { type TestFn } from 'ava';
import OpenAI from 'openai';
import { cacheKey, IGNORED_FIELDS } from '../../lib/models/cache/cache-key.js';
import type { ResponseCache } from '../../lib/models/cache/response-cache.js';
import type { CatalogModel } from '../../lib/models/catalog.js';
import { createGatewayMetrics } from '../../lib/metrics/gateway-metrics.js';
import { MemoryResponseCache } from '../../lib/stores/memory/response-cache.js';
import { RedisResponseCache } from '../../lib/stores/redis/response-cache.js';
import { responseCacheContract } from '../../lib/testing/response-cache-contract.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { loopbackPair } from '../helpers/http.js';
import { catalogProviders, CATALOG, modelsApp } from '../helpers/models-app.js';
import { reply, replyEvents, scriptedUpstream } from '../helpers/models-upstream.js';
import { until } from '../helpers/poll.js';
import { redisClients } from '../helpers/redis-clients.js';
import { withRedis } from '../helpers/services.js';

const test = anyTest as TestFn;
const redis = redisClients(test);
// Read at once: the suites below are declared as the file loads.
const fixture = (name: string) => readFileSync(new URL(`../../../test/fixtures/translation/${name}`, import.meta.url), 'utf8');
const OPENAI_TOOL_STREAM = fixture('openai-parallel-tool-calls.sse');
const ANTHROPIC_TOOL_STREAM = fixture('anthropic-text-and-parallel-tool-use.sse');
const RESPONSES_TOOL_STREAM = fixture('openai-responses-text-and-function-calls.sse');

const CHAT = '/v1/chat/completions';
const MESSAGES = '/v1/messages';
const RESPONSES = '/v1/responses';
const PRICE = { input: 2.5, output: 10 };
// The test catalog's models, their answers kept a minute.
const CACHED: CatalogModel[] = CATALOG.map((model) => ({ ...model, price: PRICE, cache: { ttlSeconds: 60 } }));
const ask = (content: string, extra: Record<string, unknown> = {}) => ({ model: 'gpt-test', messages: [{ role: 'user', content }], ...extra });
const chatAnswer = (text: string) => ({
  id: 'chatcmpl-upstream',
  object: 'chat.completion',
  created: 1_744_000_000,
  model: 'gpt-4o-mini-2024-07-18',
  choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 },
});

/** An app over a scripted upstream whose calls are cached in `store`, its usage records kept. */
async function cachedApp(t: { teardown(fn: () => unknown): void }, store: ResponseCache = new MemoryResponseCache(), extra: Record<string, unknown> = {}) {
  const upstream = await scriptedUpstream();
  const records: UsageRecord[] = [];
  // A lookup bound far above what a loaded machine's Redis takes: only the stalled store's test is about the bound.
  const app = await modelsApp({
    catalog: CACHED,
    providers: catalogProviders(upstream.url),
    cache: { store, lookupTimeoutMs: 5000 },
    usageRecorder: { record: (record) => records.push(record) },
    ...extra,
  });
  t.teardown(async () => {
    await app.close();
    await upstream.close();
  });
  const key = await app.keyFor();
  const chat = (body: unknown, headers: Record<string, string> = {}) => app.post(CHAT, body, { authorization: `Bearer ${key}`, ...headers });
  return { app, upstream, records, key, chat };
}

// Each store against the contract of them all.
responseCacheContract(test, 'MemoryResponseCache', async ({ maxEntryBytes }) => new MemoryResponseCache({ maxEntryBytes }));
responseCacheContract(
  withRedis(test),
  'RedisResponseCache',
  async ({ maxEntryBytes }) => new RedisResponseCache({ client: await redis.client(), keyPrefix: redis.keyPrefix(), maxEntryBytes }),
);

test('MemoryResponseCache: an entry is gone after its time to live', async (t) => {
  let now = 1_000_000;
  const cache = new MemoryResponseCache({ nowMs: () => now });
  await cache.set('acme', 'k', 'entry', 60);
  now += 59_999;
  t.is(await cache.get('acme', 'k'), 'entry');
  now += 2;
  t.is(await cache.get('acme', 'k'), undefined);
});

// Bodies of JSON values, with a field the deny-list does not name.
const jsonValue = fc.jsonValue({ maxDepth: 2 });
const fieldName = fc.string({ minLength: 1, maxLength: 12 }).filter((name) => !IGNORED_FIELDS.has(name) && name !== '__proto__');
const parts = { account: 'acme', endpoint: 'chatCompletions' as const, model: 'gpt-test' };

testProp(
  'any field outside the deny-list changes the key; a field of the deny-list does not',
  [fc.dictionary(fieldName, jsonValue, { maxKeys: 6 }), fieldName, jsonValue, fc.constantFrom(...IGNORED_FIELDS), jsonValue],
  (t, body, field, value, ignored, ignoredValue) => {
    const key = cacheKey({ ...parts, body });
    const changed =
      field in body ? { ...body, [field]: JSON.stringify(value) === JSON.stringify(body[field]) ? [body[field]] : value } : { ...body, [field]: value };
    t.not(cacheKey({ ...parts, body: changed }), key);
    t.is(cacheKey({ ...parts, body: { ...body, [ignored]: ignoredValue } }), key);
    // The order of the fields never matters.
    t.is(cacheKey({ ...parts, body: Object.fromEntries(Object.entries(body).reverse()) }), key);
  },
);

test('the key is per account, per key that asks for its own, per endpoint format, per model and per header the upstream is sent', (t) => {
  const body = ask('hi');
  const key = cacheKey({ ...parts, body });
  t.not(cacheKey({ ...parts, account: 'globex', body }), key);
  t.not(cacheKey({ ...parts, keyId: 'key_1', body }), key);
  t.not(cacheKey({ ...parts, endpoint: 'responses', body }), key);
  t.not(cacheKey({ ...parts, model: 'claude-test', body }), key);
  // A beta the upstream is sent may change the answer.
  t.not(cacheKey({ ...parts, body, headers: { 'anthropic-beta': 'output-128k-2025-02-19' } }), key);
});

test('a repeated call is a hit: the same answer, x-kmg-cache: hit and an age, no upstream call, recorded at cost 0 with what it saved', async (t) => {
  // The cache's clock stands still: the hit is 0 seconds old.
  const store = new MemoryResponseCache();
  const { upstream, records, chat } = await cachedApp(t, store, { cache: { store, nowMs: () => Date.parse('2030-01-15T12:00:00Z') } });
  upstream.answer(CHAT, reply(200, chatAnswer('Paris.')));
  const first = await chat(ask('Capital of France?'));
  t.is(first.headers.get('x-kmg-cache'), 'miss');
  const original = (await first.json()) as { id: string; choices: Array<Record<string, unknown>>; usage: Record<string, unknown>; model: string };
  const second = await chat(ask('Capital of France?', { user: 'someone-else' }));
  t.is(second.status, 200);
  t.is(second.headers.get('x-kmg-cache'), 'hit');
  t.is(second.headers.get('age'), '0');
  const replayed = (await second.json()) as typeof original;
  t.like(replayed.choices, original.choices);
  t.like(replayed.usage, original.usage);
  t.is(replayed.model, 'gpt-test');
  t.not(replayed.id, original.id);
  t.is(upstream.received.length, 1);
  const recorded = await until(
    async () => records,
    (list) => list.length === 2,
  );
  t.like(recorded[0], { cache: 'miss', status: 200 });
  t.true((recorded[0]?.costPicoUsd ?? 0) > 0);
  t.like(recorded[1], { cache: 'hit', status: 200, costPicoUsd: 0, costSavedPicoUsd: recorded[0]?.costPicoUsd, inputTokens: 0, outputTokens: 0 });
});

test("a hit counts as a request: the key's requests per minute refuse it, and the refusal says no hit", async (t) => {
  // One fixed minute of the limiter's clock.
  const { app, upstream } = await cachedApp(t, new MemoryResponseCache(), { nowMs: () => Date.parse('2030-01-15T12:00:30Z') });
  upstream.answer(CHAT, reply(200, chatAnswer('Counted.')));
  const key = await app.keyFor(undefined, { limits: { requestsPerMinute: 2 } });
  const chat = () => app.post(CHAT, ask('count me'), { authorization: `Bearer ${key}` });
  t.is((await chat()).headers.get('x-kmg-cache'), 'miss');
  const hit = await chat();
  t.is(hit.headers.get('x-kmg-cache'), 'hit');
  t.is(hit.headers.get('x-ratelimit-remaining-requests'), '0');
  const refused = await chat();
  t.is(refused.status, 429);
  t.is(refused.headers.get('x-kmg-cache'), null);
  t.is(upstream.received.length, 1);
});

test('two accounts asking the same both miss', async (t) => {
  const { app, upstream, chat } = await cachedApp(t);
  upstream.answer(CHAT, reply(200, chatAnswer('One.')), 2);
  const other = await app.keyFor(undefined, { account: 'globex' });
  t.is((await chat(ask('Same question'))).headers.get('x-kmg-cache'), 'miss');
  t.is((await app.post(CHAT, ask('Same question'), { authorization: `Bearer ${other}` })).headers.get('x-kmg-cache'), 'miss');
  t.is(upstream.received.length, 2);
});

test('Cache-Control: no-cache skips the lookup, no-store the write; max-age switches caching on for a model without it', async (t) => {
  const { upstream, chat } = await cachedApp(t);
  upstream.answer(CHAT, reply(200, chatAnswer('A.')), 3);
  t.is((await chat(ask('q1'), { 'cache-control': 'no-store' })).headers.get('x-kmg-cache'), 'miss');
  t.is((await chat(ask('q1'))).headers.get('x-kmg-cache'), 'miss');
  t.is((await chat(ask('q1'), { 'cache-control': 'no-cache' })).headers.get('x-kmg-cache'), 'bypass');
  t.is((await chat(ask('q1'))).headers.get('x-kmg-cache'), 'hit');
  t.is(upstream.received.length, 3);
  // echo-1 has no cache of its own in this app only through max-age.
  const { chat: plain } = await cachedApp(t, new MemoryResponseCache(), { catalog: CATALOG });
  const echo = { model: 'echo-1', messages: [{ role: 'user', content: 'hello' }] };
  t.is((await plain(echo)).headers.get('x-kmg-cache'), 'bypass');
  t.is((await plain(echo, { 'cache-control': 'max-age=60' })).headers.get('x-kmg-cache'), 'miss');
  t.is((await plain(echo, { 'cache-control': 'max-age=60' })).headers.get('x-kmg-cache'), 'hit');
});

/** The stores of both deployments: the embedded default's memory, and Redis (with keys of the test's own). */
const STORES: Array<[string, TestFn, () => Promise<ResponseCache>]> = [
  ['memory', test, async () => new MemoryResponseCache()],
  ['Redis', withRedis(test), async () => new RedisResponseCache({ client: await redis.client(), keyPrefix: redis.keyPrefix() })],
];

for (const [storeName, storeTest, makeStore] of STORES) {
  storeTest(`${storeName}: errors, 429s and cut streams are never stored`, async (t) => {
    const { upstream, chat } = await cachedApp(t, await makeStore());
    upstream.answer(CHAT, reply(500, { error: { message: 'boom', type: 'server_error' } }));
    upstream.answer(CHAT, reply(429, { error: { message: 'slow down', type: 'rate_limit_error' } }));
    // A stream whose connection drops after its first chunk.
    const cut = new Readable({ read() {} });
    upstream.answer(CHAT, replyEvents(cut));
    upstream.answer(CHAT, reply(200, chatAnswer('Finally.')));
    t.is((await chat(ask('flaky'))).status, 502);
    t.is((await chat(ask('flaky'))).status, 429);
    // Its first event, which sends the answer's headers, then the drop.
    cut.push(`${OPENAI_TOOL_STREAM.split('\n\n')[0]}\n\n`);
    const streamed = await chat(ask('flaky', { stream: true }));
    cut.destroy(new Error('dropped'));
    await streamed.text();
    const whole = await chat(ask('flaky'));
    t.is(whole.headers.get('x-kmg-cache'), 'miss');
    t.is(((await whole.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content, 'Finally.');
    t.is(upstream.received.length, 4);
  });

  storeTest(`${storeName}: a stream the client leaves is not stored`, async (t) => {
    const { upstream, chat } = await cachedApp(t, await makeStore());
    let upstreamClosed: Promise<unknown> = Promise.resolve();
    upstream.answer(CHAT, (res) => {
      upstreamClosed = new Promise((resolve) => res.once('close', resolve));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`${OPENAI_TOOL_STREAM.split('\n\n')[0]}\n\n`);
    });
    upstream.answer(CHAT, reply(200, chatAnswer('Whole.')));
    const answer = await chat(ask('leave', { stream: true }));
    const reader = answer.body!.getReader();
    await reader.read();
    await reader.cancel();
    // The gateway let go of the upstream: the client is gone.
    await upstreamClosed;
    const after = await chat(ask('leave'));
    t.is(after.headers.get('x-kmg-cache'), 'miss');
    t.is(upstream.received.length, 2);
  });

  storeTest(`${storeName}: 20 identical calls on a cold key make one upstream call`, async (t) => {
    const { upstream, chat } = await cachedApp(t, await makeStore());
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    upstream.answer(CHAT, (res, request) => void released.then(() => reply(200, chatAnswer('Once.'))(res, request)));
    const calls = Array.from({ length: 20 }, () => chat(ask('stampede')));
    await until(
      async () => upstream.received.length,
      (count) => count >= 1,
    );
    release();
    const answers = await Promise.all(calls);
    t.is(upstream.received.length, 1);
    t.deepEqual(
      answers.map((answer) => answer.status),
      Array(20).fill(200),
    );
    t.is(answers.filter((answer) => answer.headers.get('x-kmg-cache') === 'hit').length, 19);
  });
}

/** What a usage says, without the details that are 0 when left out (`audio_tokens`). */
const usageFigures = (usage: OpenAI.CompletionUsage | undefined) => ({
  prompt_tokens: usage?.prompt_tokens,
  completion_tokens: usage?.completion_tokens,
  total_tokens: usage?.total_tokens,
  prompt_tokens_details: { cached_tokens: usage?.prompt_tokens_details?.cached_tokens },
});

test('a JSON call and a streamed one share an entry: the openai SDK stream helper reads the replay as the original', async (t) => {
  const { app, upstream, key } = await cachedApp(t);
  upstream.answer(CHAT, replyEvents(Readable.from([OPENAI_TOOL_STREAM])));
  const client = new OpenAI({ baseURL: `${app.url}/v1`, apiKey: key, maxRetries: 0 });
  const request = { model: 'gpt-test', messages: [{ role: 'user' as const, content: 'Weather in Paris and Tokyo?' }], stream_options: { include_usage: true } };
  const original = await client.chat.completions.stream(request).finalChatCompletion();
  const replayed = await client.chat.completions.stream(request).finalChatCompletion();
  t.is(upstream.received.length, 1);
  t.deepEqual(replayed.choices, original.choices);
  t.like(replayed.usage, usageFigures(original.usage));
  t.true((original.choices[0]?.message.tool_calls?.length ?? 0) === 2);
  const { data: json, response } = await client.chat.completions.create({ model: 'gpt-test', messages: request.messages }).withResponse();
  t.is(response.headers.get('x-kmg-cache'), 'hit');
  t.deepEqual(json.choices[0]?.message.tool_calls, original.choices[0]?.message.tool_calls);
  t.like(json.usage, usageFigures(original.usage));
  // Without include_usage, the replay has no usage chunk, as a relayed stream would not.
  const chunks = [];
  for await (const chunk of await client.chat.completions.create({ model: 'gpt-test', messages: request.messages, stream: true })) chunks.push(chunk);
  t.false(chunks.some((chunk) => chunk.usage));
});

test('the Anthropic SDK stream helper reads a replayed Messages stream as the original', async (t) => {
  const { app, upstream, key } = await cachedApp(t);
  upstream.answer(MESSAGES, replyEvents(Readable.from([ANTHROPIC_TOOL_STREAM])));
  const client = new Anthropic({ baseURL: app.url, apiKey: key, maxRetries: 0 });
  const request = { model: 'claude-test', max_tokens: 1024, messages: [{ role: 'user' as const, content: 'Weather in San Francisco and Paris?' }] };
  const original = await client.messages.stream(request).finalMessage();
  const replayed = await client.messages.stream(request).finalMessage();
  t.is(upstream.received.length, 1);
  // The replay is written by the gateway's writer, which adds the fields the SDK declares (a tool_use block's `caller`).
  const withoutCaller = (content: readonly object[]) => content.map((block) => ({ ...block, caller: undefined }));
  t.deepEqual(withoutCaller(replayed.content), withoutCaller(original.content));
  // Every figure of the original's usage; the writer adds the fields the SDK declares as null.
  t.like(replayed.usage, original.usage);
  t.is(replayed.stop_reason, original.stop_reason);
  t.not(replayed.id, original.id);
  // Asked as the one before it: the same events, a fresh id.
  const again = await client.messages.stream(request).finalMessage();
  t.deepEqual(again.content, replayed.content);
  t.not(again.id, replayed.id);
  const json = await client.messages.create(request);
  t.deepEqual(withoutCaller(json.content), withoutCaller(original.content));
  t.like(json.usage, original.usage);
});

test('a store that stalls costs the lookup bound and a miss; one that fails a miss, reported', async (t) => {
  const stalled: ResponseCache = { get: () => new Promise(() => {}), set: async () => true, purge: async () => {} };
  const { app, upstream, chat } = await cachedApp(t, stalled, { cache: { store: stalled, lookupTimeoutMs: 50 } });
  upstream.answer(CHAT, reply(200, chatAnswer('Still here.')));
  // The store never answers: the call ends only because the lookup is bounded.
  const answer = await chat(ask('stall'));
  t.is(answer.status, 200);
  t.is(answer.headers.get('x-kmg-cache'), 'miss');
  t.true(app.reported.length >= 1);
  const broken: ResponseCache = {
    get: async () => Promise.reject(new Error('down')),
    set: async () => Promise.reject(new Error('down')),
    purge: async () => {},
  };
  const second = await cachedApp(t, broken, { cache: { store: broken } });
  second.upstream.answer(CHAT, reply(200, chatAnswer('Still here.')));
  t.is((await second.chat(ask('down'))).status, 200);
});

test('a store that answered while this process stalled past the lookup bound is read, not timed out: the repeated call is a hit', async (t) => {
  const [near, far] = await loopbackPair(t);
  const memory = new MemoryResponseCache();
  const answering: ResponseCache = {
    get: async (account, key) => {
      const text = await memory.get(account, key);
      const answered = once(near, 'data');
      far.write('answer');
      // The process stalls past the bound, as on a loaded machine, with the answer already there.
      const stalledUntil = Date.now() + 200;
      while (Date.now() < stalledUntil);
      await answered;
      return text;
    },
    set: (account, key, entry, ttlSeconds) => memory.set(account, key, entry, ttlSeconds),
    purge: (account) => memory.purge(account),
  };
  const { app, upstream, chat } = await cachedApp(t, answering, { cache: { store: answering, lookupTimeoutMs: 50 } });
  upstream.answer(CHAT, reply(200, chatAnswer('Once.')));
  t.is((await chat(ask('stalled'))).headers.get('x-kmg-cache'), 'miss');
  t.is((await chat(ask('stalled'))).headers.get('x-kmg-cache'), 'hit');
  t.deepEqual(app.reported, []);
});

test('a hit that asks what the storing call asked is sent the answer as it was written, a fresh id in it; one that asks otherwise has it written again', async (t) => {
  const memory = new MemoryResponseCache();
  let stored: { account: string; key: string } | undefined;
  let declineWritten = false;
  // The memory store, telling where the entry went; or declining an entry with its written answer, as a store bounded below its size does.
  const store: ResponseCache = {
    get: (account, key) => memory.get(account, key),
    set: async (account, key, entry, ttlSeconds) => {
      if (declineWritten && 'written' in JSON.parse(entry.slice(0, entry.indexOf('\n')))) return false;
      stored = { account, key };
      return memory.set(account, key, entry, ttlSeconds);
    },
    purge: (account) => memory.purge(account),
  };
  const { upstream, chat } = await cachedApp(t, store);
  upstream.answer(CHAT, reply(200, chatAnswer('Paris.')), 2);
  t.is((await chat(ask('Capital of France?'))).headers.get('x-kmg-cache'), 'miss');
  const where = await until(
    async () => stored,
    (found) => found !== undefined,
  );
  if (where === undefined) return t.fail('the entry was never stored');
  const { account, key } = where;
  // Marked in the written answer only (the entry's first line; its parts are on the second): a hit sent it as it is says so.
  const [head = '{}', parts] = ((await memory.get(account, key)) ?? '').split('\n');
  const entry = JSON.parse(head) as { written: { pieces: string[] } };
  entry.written.pieces = entry.written.pieces.map((piece) => piece.replace('Paris.', 'Marked.'));
  await memory.set(account, key, `${JSON.stringify(entry)}\n${parts}`, 60);
  type Answer = { id: string; choices: Array<{ message: { content: string } }> };
  const hits = await Promise.all([chat(ask('Capital of France?')), chat(ask('Capital of France?'))]);
  const [one, two] = (await Promise.all(hits.map((hit) => hit.json()))) as Answer[];
  t.deepEqual(
    hits.map((hit) => hit.headers.get('x-kmg-cache')),
    ['hit', 'hit'],
  );
  t.is(one?.choices[0]?.message.content, 'Marked.');
  t.regex(one?.id ?? '', /^chatcmpl-[A-Za-z0-9]{24}$/);
  t.not(one?.id, two?.id);
  t.deepEqual({ ...two, id: '' }, { ...one, id: '' });
  // Another user, or a stream: written from the parts.
  const other = (await (await chat(ask('Capital of France?', { user: 'someone-else' }))).json()) as Answer;
  t.is(other.choices[0]?.message.content, 'Paris.');
  const streamed = await (await chat(ask('Capital of France?', { stream: true }))).text();
  t.regex(streamed, /"content":"Paris\."/);
  t.notRegex(streamed, /Marked/);
  // An entry too large with its written answer is stored without it, and still answers.
  declineWritten = true;
  stored = undefined;
  t.is((await chat(ask('Capital of Spain?'))).headers.get('x-kmg-cache'), 'miss');
  await until(
    async () => stored,
    (found) => found !== undefined,
  );
  const hit = await chat(ask('Capital of Spain?'));
  t.is(hit.headers.get('x-kmg-cache'), 'hit');
  t.is(((await hit.json()) as Answer).choices[0]?.message.content, 'Paris.');
  t.is(upstream.received.length, 2);
});

withRedis(test)('a hit stored by one instance is served by another on the same Redis', async (t) => {
  const keyPrefix = redis.keyPrefix();
  const one = await cachedApp(t, new RedisResponseCache({ client: await redis.client(), keyPrefix }));
  const two = await cachedApp(t, new RedisResponseCache({ client: await redis.client(), keyPrefix }));
  one.upstream.answer(CHAT, reply(200, chatAnswer('Shared.')));
  t.is((await one.chat(ask('across'))).headers.get('x-kmg-cache'), 'miss');
  // The second app's keys are of the same account.
  const hit = await until(
    async () => two.chat(ask('across')),
    (res) => res.headers.get('x-kmg-cache') === 'hit',
    { attempts: 50 },
  );
  t.is(hit.status, 200);
  t.is(two.upstream.received.length, 0);
});

test('the openai SDK stream helper reads a replayed Responses stream as the original', async (t) => {
  const { app, upstream, key } = await cachedApp(t);
  upstream.answer(RESPONSES, replyEvents(Readable.from([RESPONSES_TOOL_STREAM])));
  const client = new OpenAI({ baseURL: `${app.url}/v1`, apiKey: key, maxRetries: 0 });
  const request = { model: 'gpt-test', input: 'Weather in Paris and Tokyo?' };
  // What the helper's events tell: the text, the function calls done, the usage (the recorded
  // stream's final response lists no output of its own).
  const read = async () => {
    const stream = client.responses.stream(request);
    let text = '';
    const calls: unknown[] = [];
    for await (const event of stream) {
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.output_item.done' && event.item.type === 'function_call')
        calls.push([event.item.name, event.item.arguments, event.item.call_id]);
    }
    const final = await stream.finalResponse();
    return { text, calls, usage: { input: final.usage?.input_tokens, output: final.usage?.output_tokens }, id: final.id };
  };
  const original = await read();
  const replayed = await read();
  t.is(upstream.received.length, 1);
  t.true(original.text.length > 0 && original.calls.length > 0);
  t.deepEqual({ ...replayed, id: '' }, { ...original, id: '' });
  t.not(replayed.id, original.id);
});

test('a call the cache could not replay is not answered from the entry of the same call asked otherwise', async (t) => {
  const { upstream, chat } = await cachedApp(t);
  upstream.answer(CHAT, reply(200, chatAnswer('Hello.')), 5);
  t.is((await chat(ask('greet', { user: 'someone' }))).headers.get('x-kmg-cache'), 'miss');
  // The entry is stored as the answer ends, not before it.
  const hit = await until(
    () => chat(ask('greet', { user: 'someone' })),
    (res) => res.headers.get('x-kmg-cache') === 'hit',
  );
  t.is(hit.headers.get('x-kmg-cache'), 'hit');
  // The same key, a user the neutral form cannot hold: read again, not taken on the word of the other variant.
  const odd = await chat(ask('greet', { user: 5 }));
  t.is(odd.headers.get('x-kmg-cache'), 'bypass');
  t.is(odd.status, 200);
});

test('a request the cache could not replay whole is not cached; every outcome is counted', async (t) => {
  const metrics = createGatewayMetrics();
  const { upstream, chat } = await cachedApp(t, new MemoryResponseCache(), { metrics });
  upstream.answer(CHAT, reply(200, chatAnswer('Two.')), 3);
  // Two choices: the neutral form holds one.
  t.is((await chat(ask('two ways', { n: 2 }))).headers.get('x-kmg-cache'), 'bypass');
  t.is((await chat(ask('two ways', { n: 2 }))).headers.get('x-kmg-cache'), 'bypass');
  t.is((await chat(ask('one way'))).headers.get('x-kmg-cache'), 'miss');
  t.is((await chat(ask('one way'))).headers.get('x-kmg-cache'), 'hit');
  t.is(upstream.received.length, 3);
  const text = await until(
    () => metrics.registry.metrics(),
    (scraped) => scraped.includes('kmg_cache_requests_total{outcome="hit"} 1'),
  );
  t.regex(text, /kmg_cache_requests_total\{outcome="bypass"\} 2/);
  t.regex(text, /kmg_cache_requests_total\{outcome="miss"\} 1/);
});
