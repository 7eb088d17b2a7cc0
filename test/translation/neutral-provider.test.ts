import test from 'ava';
import type { CooldownStore } from '../../lib/models/routing/cooldown-store.js';
import type { Answer, StreamPart } from '../../lib/models/formats/neutral.js';
import { untranslatable } from '../../lib/models/formats/neutral.js';
import { UpstreamStatusError, type NeutralCall, type NeutralProtocol, type Provider } from '../../lib/models/provider.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { MemoryResponseCache } from '../../lib/stores/memory/response-cache.js';
import { modelsApp } from '../helpers/models-app.js';
import { until } from '../helpers/poll.js';

// A provider of the neutral representation (`Provider.neutral`) reached from every client format:
// requests read by the client's reader, answers and streams written by its writer, its errors
// answered, retried and cooled down as a wire provider's are, its usage metered and priced.

/** A neutral provider whose answers each test scripts; the calls it got, in order. */
function scriptedNeutral(id: string) {
  const calls: NeutralCall[] = [];
  const script: { generate: (call: NeutralCall) => Promise<Answer>; stream: (call: NeutralCall) => AsyncIterable<StreamPart> } = {
    generate: async () => answer('Hello.'),
    stream: () => parts('Hel', 'lo.'),
  };
  const state = { returned: 0, check: undefined as NeutralProtocol['check'] };
  const provider: Provider = {
    id,
    neutral: {
      name: 'Scripted',
      check: (request) => state.check?.(request) ?? [],
      generate: (call) => {
        calls.push(call);
        return script.generate(call);
      },
      async *stream(call) {
        calls.push(call);
        try {
          yield* script.stream(call);
        } finally {
          state.returned++;
        }
      },
    },
  };
  return { provider, calls, script, state };
}

const USAGE = { inputTokens: 1_000_000, outputTokens: 500_000, cacheReadTokens: 200_000 };
const answer = (text: string): Answer => ({
  id: 'answer-1',
  model: 'up-model',
  content: [{ type: 'text', text }],
  finishReason: 'stop',
  usage: USAGE,
  created: 1_800_000_000,
});
async function* parts(...texts: string[]): AsyncGenerator<StreamPart> {
  yield { type: 'start', id: 'answer-1', model: 'up-model', created: 1_800_000_000 };
  yield { type: 'text-start' };
  for (const delta of texts) yield { type: 'text-delta', delta };
  yield { type: 'text-end' };
  yield { type: 'finish', finishReason: 'stop', usage: USAGE };
}

const main = scriptedNeutral('neutral');
const embedError = { status: 429 };
main.provider.embed = async () => {
  throw new UpstreamStatusError(embedError.status, 'Quota exceeded for embeddings', { retryAfter: '9' });
};
const spare = scriptedNeutral('spare');
const records: UsageRecord[] = [];
const failures: Array<{ deployment: string; retryAfterMs: number | undefined }> = [];
const cooldowns: CooldownStore = {
  fail: async (deployment, _policy, _nowMs, retryAfterMs) => {
    failures.push({ deployment, retryAfterMs });
    return null;
  },
  coolingUntil: async (deployments) => deployments.map(() => null),
};
const gateway = await modelsApp({
  catalog: [
    { id: 'neutral-model', provider: 'neutral', upstreamModel: 'up-model', price: { input: 1, output: 4, cacheRead: 0.5 } },
    { id: 'routed', deployments: [{ provider: 'neutral' }, { provider: 'spare' }] },
    { id: 'vectors', provider: 'neutral', type: 'embeddings' },
  ],
  providers: [main.provider, spare.provider],
  usageRecorder: { record: (record) => records.push(record) },
  routing: { maxAttempts: 2, random: () => 0, sleep: async () => {}, cooldown: { store: cooldowns } },
});
test.after.always(() => gateway.close());
test.beforeEach(() => {
  for (const each of [main, spare]) {
    each.calls.splice(0);
    each.script.generate = async () => answer('Hello.');
    each.script.stream = () => parts('Hel', 'lo.');
    each.state.check = undefined;
  }
  records.splice(0);
  failures.splice(0);
});

const key = await gateway.keyFor();
const CLIENTS = {
  chat: (body: Record<string, unknown> = {}, signal?: AbortSignal) =>
    gateway.post(
      '/v1/chat/completions',
      { model: 'neutral-model', messages: [{ role: 'user', content: 'hi' }], ...body },
      { authorization: `Bearer ${key}` },
      signal,
    ),
  responses: (body: Record<string, unknown> = {}, signal?: AbortSignal) =>
    gateway.post('/v1/responses', { model: 'neutral-model', input: 'hi', ...body }, { authorization: `Bearer ${key}` }, signal),
  messages: (body: Record<string, unknown> = {}, signal?: AbortSignal) =>
    gateway.post(
      '/v1/messages',
      { model: 'neutral-model', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }], ...body },
      { 'x-api-key': key },
      signal,
    ),
};
interface ChatBody {
  choices: Array<{ finish_reason: string; message: { content: string; tool_calls: Array<{ id: string; function: { arguments: string } }> } }>;
}
const TEXT_OF = {
  chat: (body: unknown) => (body as ChatBody).choices[0]?.message.content,
  responses: (body: unknown) => (body as { output: Array<{ content: Array<{ text: string }> }> }).output[0]?.content[0]?.text,
  messages: (body: unknown) => (body as { content: Array<{ text: string }> }).content[0]?.text,
};
/** Each format's in-stream error event. */
const ERROR_EVENT = { chat: /^data: \{"error":/m, responses: /^event: (error|response\.failed)$/m, messages: /^event: error$/m };
// 1M input tokens at $1 (0.2M of them cache reads at $0.5), 0.5M output at $4: $2.90.
const COST_PICO_USD = 2_900_000_000_000;

for (const [name, send] of Object.entries(CLIENTS) as Array<[keyof typeof CLIENTS, (typeof CLIENTS)['chat']]>) {
  test.serial(`${name}: a JSON answer of a neutral provider, in the client's format, metered and priced`, async (t) => {
    const response = await send({});
    t.is(response.status, 200);
    const body = (await response.json()) as { model: string };
    t.is(TEXT_OF[name](body), 'Hello.');
    t.is(body.model, 'neutral-model');
    t.is(response.headers.get('x-kmg-deployment'), 'neutral');
    const [call] = main.calls;
    t.like(call?.request, { model: 'up-model', stream: false, messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }] });
    const [record] = await until(
      async () => records,
      (all) => all.length === 1,
    );
    t.like(record, { model: 'neutral-model', provider: 'neutral', inputTokens: 1_000_000, outputTokens: 500_000, costPicoUsd: COST_PICO_USD });
  });

  test.serial(`${name}: a stream of a neutral provider, event by event in the client's format, metered`, async (t) => {
    const response = await send({ stream: true });
    t.is(response.status, 200);
    t.regex(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    const text = await response.text();
    t.true(text.includes('Hel') && text.includes('lo.'));
    t.notRegex(text, ERROR_EVENT[name]);
    const [record] = await until(
      async () => records,
      (all) => all.length === 1,
    );
    t.like(record, { inputTokens: 1_000_000, outputTokens: 500_000, costPicoUsd: COST_PICO_USD });
    t.is(main.state.returned > 0, true);
  });

  test.serial(`${name}: an error after the stream's first part ends it in the client's error event`, async (t) => {
    main.script.stream = async function* () {
      yield { type: 'start', id: 'a', model: 'up-model', created: 1 };
      yield { type: 'text-start' };
      yield { type: 'text-delta', delta: 'Hel' };
      throw new UpstreamStatusError(500, 'internal');
    };
    const response = await send({ stream: true });
    t.is(response.status, 200);
    const text = await response.text();
    t.true(text.includes('Hel'));
    t.regex(text, ERROR_EVENT[name]);
    t.false(text.includes('internal'));
  });
}

test.serial('tools: the definitions reach the provider, its parallel calls reach a Chat Completions client in order', async (t) => {
  main.script.generate = async () => ({
    ...answer(''),
    content: [
      { type: 'tool-call', id: 'call_1', name: 'weather', input: '{"city":"Paris"}' },
      { type: 'tool-call', id: 'call_2', name: 'weather', input: '{"city":"Rome"}' },
    ],
    finishReason: 'tool-calls',
  });
  const tools = [
    { type: 'function', function: { name: 'weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  ];
  const response = await CLIENTS.chat({ tools });
  const [choice] = ((await response.json()) as ChatBody).choices;
  t.is(choice?.finish_reason, 'tool_calls');
  t.deepEqual(
    choice?.message.tool_calls.map((call) => [call.id, call.function.arguments]),
    [
      ['call_1', '{"city":"Paris"}'],
      ['call_2', '{"city":"Rome"}'],
    ],
  );
  t.like(main.calls[0]?.request.tools[0], { name: 'weather', description: 'Weather' });
});

test.serial("a field the provider's check() refuses is a 400 naming the client's field, before the provider is called", async (t) => {
  main.state.check = (request) => {
    if (request.verbosity !== undefined) throw untranslatable(request.params.verbosity ?? 'verbosity', 'Scripted');
    return request.openAI?.prompt_cache_key === undefined ? [] : ['prompt_cache_key'];
  };
  const refused = await CLIENTS.chat({ verbosity: 'low' });
  t.is(refused.status, 400);
  t.regex(((await refused.json()) as { error: { message: string } }).error.message, /'verbosity'.*Scripted/);
  t.is(main.calls.length, 0);
  const omitted = await CLIENTS.chat({ prompt_cache_key: 'k' });
  t.is(omitted.status, 200);
  t.is(omitted.headers.get('x-kmg-omitted'), 'prompt_cache_key');
});

test.serial("an upstream's 400 reaches the client with its status and message", async (t) => {
  main.script.generate = async () => {
    throw new UpstreamStatusError(400, 'Invalid JSON payload received.', { code: 'INVALID_ARGUMENT' });
  };
  const response = await CLIENTS.messages({});
  t.is(response.status, 400);
  t.like(await response.json(), { type: 'error', error: { message: 'Invalid JSON payload received.' } });
});

test.serial("an upstream's 500 is a 502 without its words; any other error too", async (t) => {
  main.script.generate = async () => {
    throw new UpstreamStatusError(500, 'secret internals');
  };
  const failed = await CLIENTS.chat({});
  t.is(failed.status, 502);
  t.false((await failed.text()).includes('secret'));
  main.script.generate = async () => {
    throw new Error('socket hang up');
  };
  t.is((await CLIENTS.chat({})).status, 502);
});

test.serial("a 429 with retry-after is retried on the next deployment, and the first one's cooldown told its retry-after", async (t) => {
  main.script.generate = async () => {
    throw new UpstreamStatusError(429, 'Resource has been exhausted', { code: 'RESOURCE_EXHAUSTED', retryAfter: '7' });
  };
  spare.script.generate = async () => answer('From the spare.');
  const response = await CLIENTS.chat({ model: 'routed' });
  t.is(response.status, 200);
  t.is(TEXT_OF.chat(await response.json()), 'From the spare.');
  t.is(response.headers.get('x-kmg-attempts'), '2');
  t.is(response.headers.get('x-kmg-deployment'), 'spare');
  t.deepEqual(failures, [{ deployment: 'neutral/routed', retryAfterMs: 7000 }]);
});

test.serial('a 429 of a stream before its first part is retried as well; alone, it reaches the client with its retry-after', async (t) => {
  main.script.stream = () => ({
    [Symbol.asyncIterator]: () => ({
      next: () => Promise.reject(new UpstreamStatusError(429, 'Slow down', { retryAfter: '3' })),
    }),
  });
  const routed = await CLIENTS.messages({ model: 'routed', stream: true });
  t.is(routed.status, 200);
  t.true((await routed.text()).includes('lo.'));
  const alone = await CLIENTS.messages({ stream: true });
  t.is(alone.status, 429);
  t.is(alone.headers.get('retry-after'), '3');
  t.like(await alone.json(), { error: { message: 'Slow down' } });
});

test.serial("a client that leaves mid-stream aborts the provider's signal and stops its stream", async (t) => {
  let aborted = false;
  main.script.stream = async function* ({ signal }) {
    yield { type: 'start', id: 'a', model: 'up-model', created: 1 };
    yield { type: 'text-start' };
    yield { type: 'text-delta', delta: 'Hel' };
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    aborted = true;
    yield { type: 'text-delta', delta: 'never' };
  };
  const returned = main.state.returned;
  const controller = new AbortController();
  const response = await CLIENTS.chat({ stream: true }, controller.signal);
  await response.body?.getReader().read();
  controller.abort();
  await until(
    async () => main.state.returned,
    (count) => count > returned,
  );
  t.true(aborted);
});

test.serial("a count of tokens for a neutral provider's model is estimated", async (t) => {
  const response = await gateway.post(
    '/v1/messages/count_tokens',
    { model: 'neutral-model', messages: [{ role: 'user', content: 'hello there, how are you?' }] },
    { 'x-api-key': key },
  );
  t.is(response.status, 200);
  t.true(((await response.json()) as { input_tokens: number }).input_tokens > 0);
  t.is(main.calls.length, 0);
});

test.serial("an embed() that throws an upstream's 429 is a 429 with its message and retry-after; a 503 a 502", async (t) => {
  const embed = () => gateway.post('/v1/embeddings', { model: 'vectors', input: ['a', 'b'] }, { authorization: `Bearer ${key}` });
  embedError.status = 429;
  const throttled = await embed();
  t.is(throttled.status, 429);
  t.is(throttled.headers.get('retry-after'), '9');
  t.like(await throttled.json(), { error: { message: 'Quota exceeded for embeddings' } });
  embedError.status = 503;
  t.is((await embed()).status, 502);
});

test('a provider that misses the signal still ends: silent past timeoutMs, a JSON call is a 504 and a stream ends in its error event', async (t) => {
  const deaf: Provider = {
    id: 'deaf',
    neutral: {
      name: 'Deaf',
      generate: () => new Promise<Answer>(() => {}),
      async *stream() {
        yield { type: 'start', id: 'a', model: 'm', created: 1 };
        yield { type: 'text-start' };
        yield { type: 'text-delta', delta: 'Hel' };
        await new Promise(() => {});
      },
    },
  };
  const quick = await modelsApp({ catalog: [{ id: 'deaf-model', provider: 'deaf' }], providers: [deaf], timeoutMs: 300 });
  t.teardown(quick.close);
  const quickKey = await quick.keyFor();
  const ask = (stream: boolean) =>
    quick.post('/v1/messages', { model: 'deaf-model', max_tokens: 10, stream, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': quickKey });
  t.is((await ask(false)).status, 504);
  const streamed = await ask(true);
  t.is(streamed.status, 200);
  const text = await streamed.text();
  t.true(text.includes('Hel'));
  t.regex(text, ERROR_EVENT.messages);
});

test("a neutral provider's answers are cached as any: the repeated call, JSON or streamed, is a hit that calls nothing", async (t) => {
  const counted = scriptedNeutral('counted');
  const cached = await modelsApp({
    catalog: [{ id: 'cached-model', provider: 'counted', cache: { ttlSeconds: 60 } }],
    providers: [counted.provider],
    cache: { store: new MemoryResponseCache() },
  });
  t.teardown(cached.close);
  const cachedKey = await cached.keyFor();
  for (const stream of [false, true]) {
    const ask = () =>
      cached.post(
        '/v1/chat/completions',
        { model: 'cached-model', stream, messages: [{ role: 'user', content: `hi, stream ${stream}` }] },
        { authorization: `Bearer ${cachedKey}` },
      );
    const first = await ask();
    await first.text();
    const second = await ask();
    t.deepEqual([first.headers.get('x-kmg-cache'), second.headers.get('x-kmg-cache')], ['miss', 'hit'], `stream: ${stream}`);
    t.regex(await second.text(), stream ? /"content":"lo\."/ : /"content":"Hello\."/);
  }
  t.is(counted.calls.length, 2);
});
