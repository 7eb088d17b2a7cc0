import { PassThrough, Readable } from 'node:stream';
import { context, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import test from 'ava';
import Koa from 'koa';
import { pino } from 'pino';
import { apiKey } from '../../lib/auth/api-key.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { SCOPES, type Scope } from '../../lib/auth/scopes.js';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import { newFileId } from '../../lib/files/file-id.js';
import type { FileStore } from '../../lib/files/file-store.js';
import { filesRouter } from '../../lib/files/files-router.js';
import type { JsonObject } from '../../lib/models/content.js';
import { modelsRouter } from '../../lib/models/models-router.js';
import type { ProviderEndpoint } from '../../lib/models/provider.js';
import { echoProvider } from '../../lib/models/providers/echo/index.js';
import { geminiProvider } from '../../lib/models/providers/gemini/index.js';
import { MemoryResponseCache } from '../../lib/stores/memory/response-cache.js';
import type { ModelLimits } from '../../lib/quota/model-limits.js';
import { MemoryModelLimiter } from '../../lib/stores/memory/model-limiter.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { MemoryCreationLimiter } from '../../lib/stores/memory/creation-limiter.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { RedisModelLimiter } from '../../lib/stores/redis/model-limiter.js';
import { AttemptSpan } from '../../lib/tracing/attempt-span.js';
import { traceRequests } from '../../lib/tracing/trace-requests.js';
import { testClock } from '../../lib/testing/creation-limiter-contract.js';
import { tracedStore } from '../../lib/tracing/traced-store.js';
import { underPath } from '../../lib/under-path.js';
import { requestLog } from '../../reference-server/request-log.js';
import { listen } from '../helpers/http.js';
import { CATALOG, catalogProviders } from '../helpers/models-app.js';
import { anthropicMessage, reply, replyEvents, scriptedUpstream } from '../helpers/models-upstream.js';
import { pdfOf, uploadForm } from '../helpers/multipart.js';
import { until } from '../helpers/poll.js';
import { redisClients } from '../helpers/redis-clients.js';
import { postgresDatabase, withPostgres, withRedis } from '../helpers/services.js';

// One SDK for the file, as a deployment registers it: every span of every test, read back in memory.
const exporter = new InMemorySpanExporter();
const sdk = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
sdk.register();

const upstream = await scriptedUpstream();
// Request limits count the minutes of a clock that stands still: no test straddles two.
const STILL_CLOCK = testClock('2030-01-15T12:00:30.000Z').nowMs;

// An embeddings model on the OpenAI provider.
const EMBEDDINGS_MODEL = { id: 'embed-test', provider: 'openai', upstreamModel: 'text-embedding-3-small', type: 'embeddings' as const };

// A model of a provider of the neutral representation, and an embeddings model of it.
const GEMINI_MODEL = { id: 'gemini-test', provider: 'gemini', upstreamModel: 'gemini-2.5-flash' };
const GEMINI_EMBEDDINGS_MODEL = { id: 'gemini-embed-test', provider: 'gemini', upstreamModel: 'gemini-embedding-001', type: 'embeddings' as const };

/** A gateway as the reference server composes one with tracing on, its log lines kept. */
async function tracedGateway(recordContent = false, timeoutMs = 20_000, maxAttempts = 1) {
  const keys = new MemoryKeyStore();
  const files = tracedStore(new MemoryFileStore(), 'FileStore');
  const blobs = tracedStore(new MemoryBlobStore(), 'BlobStore');
  const logLines: Array<Record<string, unknown>> = [];
  const logger = pino({ base: null }, { write: (line: string) => void logLines.push(JSON.parse(line) as Record<string, unknown>) });
  const app = new Koa();
  app.use(traceRequests({ recordContent }));
  app.use(requestLog(logger));
  app.use(gatewayErrors());
  app.use(underPath('/v1', apiKey({ store: keys })));
  const routers = [
    filesRouter({ files, blobs, creationLimiter: tracedStore(new MemoryCreationLimiter(), 'CreationLimiter') }),
    modelsRouter({
      catalog: [...CATALOG, EMBEDDINGS_MODEL, GEMINI_MODEL, GEMINI_EMBEDDINGS_MODEL],
      providers: [...catalogProviders(upstream.url), geminiProvider({ id: 'gemini', baseURL: upstream.url, apiKey: 'gemini-key' })],
      files,
      blobs,
      timeoutMs,
      routing: { maxAttempts, sleep: async () => undefined },
      modelLimiter: tracedStore(new MemoryModelLimiter({ nowMs: STILL_CLOCK }), 'ModelLimiter'),
      cache: { store: new MemoryResponseCache() },
    }),
  ];
  for (const router of routers) app.use(router.routes()).use(router.allowedMethods());
  const server = await listen(app);
  const keyFor = async (scopes: Scope[] = [...SCOPES], limits: ModelLimits = {}) =>
    (await createApiKey(keys, { prefix: 'kmg', account: 'acme', scopes, models: null, limits })).key;
  return { url: server.url, close: server.close, keyFor, logLines };
}

const gateway = await tracedGateway();
const recording = await tracedGateway(true);
// A short upstream timeout, for the timeout case only.
const impatient = await tracedGateway(false, 300);
// Two attempts per call, for the retried case only.
const retrying = await tracedGateway(false, 20_000, 2);
// Clients of the shared Redis, for the traced limiter.
const redis = redisClients(test);
test.after.always(() => Promise.all([gateway.close(), recording.close(), impatient.close(), retrying.close(), upstream.close(), sdk.shutdown()]));
test.beforeEach(() => {
  exporter.reset();
  upstream.received.splice(0);
});

// Store calls inside and outside a request's span (tracedStore), on real stores and a failing one.
const tracer = trace.getTracer('test');

/** `work` inside a span of its own, as a request's chain runs; resolves with its result and the span's id. */
async function inRequest<T>(work: () => Promise<T>): Promise<{ result: T; requestSpanId: string }> {
  const span = tracer.startSpan('request');
  try {
    const result = await context.with(trace.setSpan(context.active(), span), work);
    return { result, requestSpanId: span.spanContext().spanId };
  } finally {
    span.end();
  }
}

const childrenOf = (spanId: string): ReadableSpan[] => exporter.getFinishedSpans().filter((span) => span.parentSpanContext?.spanId === spanId);

withPostgres(test).serial('KnexFileStore on PostgreSQL: each call inside a request is a span of it, and answers as the store does', async (t) => {
  const db = await postgresDatabase();
  t.teardown(() => db.destroy());
  await migrate(db.knex);
  const files = tracedStore<FileStore>(new KnexFileStore(db.knex), 'FileStore');
  const now = Math.floor(Date.now() / 1000);
  const id = newFileId(now);
  const { result, requestSpanId } = await inRequest(async () => {
    await files.create({ id, account: 'acme', filename: 'a.pdf', bytes: 10, createdAt: now, expiresAt: null }, { maxFiles: 10, maxBytes: 1000 }, now);
    return files.get('acme', id, now);
  });
  t.is(result?.id, id);
  t.deepEqual(
    childrenOf(requestSpanId).map((span) => span.name),
    ['FileStore.create', 'FileStore.get'],
  );
  // Outside a request (a sweep): no span.
  exporter.reset();
  t.is((await files.list('acme', { limit: 10, order: 'desc' }, now)).files.length, 1);
  t.deepEqual(exporter.getFinishedSpans(), []);
});

withRedis(test).serial('RedisModelLimiter: the limit check is a span of the request', async (t) => {
  const limiter = tracedStore(new RedisModelLimiter({ client: await redis.client(), keyPrefix: redis.keyPrefix() }), 'ModelLimiter');
  const { result, requestSpanId } = await inRequest(() => limiter.consume('key_1', { requestsPerMinute: 5 }));
  t.true(result.allowed);
  t.deepEqual(
    childrenOf(requestSpanId).map((span) => span.name),
    ['ModelLimiter.consume'],
  );
});

test.serial('a call that fails: error.type from its code, the span an error, the failure passed on as it was', async (t) => {
  const outage = Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
  const store = tracedStore(
    {
      find: () => Promise.reject(outage),
      close: () => 'closed',
    },
    'Flaky',
  );
  const { requestSpanId } = await inRequest(async () => {
    await t.throwsAsync(store.find(), { is: outage });
    t.is(store.close(), 'closed');
  });
  const [failed, ...others] = childrenOf(requestSpanId);
  t.is(others.length, 0, 'close() is not traced');
  t.is(failed?.name, 'Flaky.find');
  t.is(failed?.attributes['error.type'], 'ECONNRESET');
  t.is(failed?.status.code, SpanStatusCode.ERROR);
});

/** The spans of the one request made since the test began, once its server span has ended. */
async function requestSpans(): Promise<ReadableSpan[]> {
  return until(
    async () => exporter.getFinishedSpans(),
    (spans) => spans.some((span) => span.kind === SpanKind.SERVER),
  );
}

const serverSpan = (spans: ReadableSpan[]) => spans.find((span) => span.kind === SpanKind.SERVER) as ReadableSpan;
const clientSpans = (spans: ReadableSpan[]) => spans.filter((span) => span.kind === SpanKind.CLIENT);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

const post = (url: string, path: string, body: unknown, headers: Record<string, string>) =>
  fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

const openAIAnswer = {
  id: 'chatcmpl-upstream',
  object: 'chat.completion',
  created: 1_744_000_000,
  model: 'gpt-4o-mini-2024-07-18',
  choices: [{ index: 0, message: { role: 'assistant', content: 'A secret answer.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14, prompt_tokens_details: { cached_tokens: 6 } },
};

test.serial('the server span says how a model call met the response cache: a miss, then a hit', async (t) => {
  upstream.answer('/v1/chat/completions', reply(200, openAIAnswer));
  const key = await gateway.keyFor();
  const ask = async () => {
    exporter.reset();
    const response = await post(
      gateway.url,
      '/v1/chat/completions',
      { model: 'gpt-test', messages: [{ role: 'user', content: 'Cache this' }] },
      { authorization: `Bearer ${key}`, 'cache-control': 'max-age=60' },
    );
    await response.json();
    return serverSpan(await requestSpans()).attributes['kmg.cache'];
  };
  t.is(await ask(), 'miss');
  t.is(await ask(), 'hit');
});

test.serial('a key a client puts in the path or the user agent is recorded as [secret]', async (t) => {
  const key = await gateway.keyFor();
  const response = await fetch(`${gateway.url}/v1/models/${key}`, { headers: { authorization: `Bearer ${key}`, 'user-agent': `my-app key=${key}` } });
  await response.arrayBuffer();
  const server = serverSpan(await requestSpans());
  t.like(server.attributes, { 'url.path': '/v1/models/[secret]', 'user_agent.original': 'my-app key=[secret]' });
});

test.serial("each format's request parameters are recorded by their GenAI names; another format's fields are not", async (t) => {
  const provider = echoProvider({ id: 'echo' });
  const attributesOf = (endpoint: ProviderEndpoint, body: JsonObject) => {
    exporter.reset();
    new AttemptSpan(tracer, context.active(), { endpoint, provider, model: 'm', body: { model: 'm', ...body }, stream: false }, false).end();
    const [span] = exporter.getFinishedSpans();
    return Object.fromEntries(
      Object.entries(span?.attributes ?? {}).filter(([name]) => /^gen_ai\.(request|embeddings)\./.test(name) && name !== 'gen_ai.request.model'),
    );
  };
  t.deepEqual(attributesOf('chatCompletions', { max_completion_tokens: 9, seed: 3, frequency_penalty: 0.5, stop: 'END', top_k: 4 }), {
    'gen_ai.request.max_tokens': 9,
    'gen_ai.request.seed': 3,
    'gen_ai.request.frequency_penalty': 0.5,
    'gen_ai.request.stop_sequences': ['END'],
  });
  t.deepEqual(attributesOf('messages', { max_tokens: 7, top_k: 4, stop_sequences: ['a', 'b'], seed: 3 }), {
    'gen_ai.request.max_tokens': 7,
    'gen_ai.request.top_k': 4,
    'gen_ai.request.stop_sequences': ['a', 'b'],
  });
  t.deepEqual(attributesOf('responses', { max_output_tokens: 5, temperature: 0.1, max_tokens: 8, stop: 'x' }), {
    'gen_ai.request.max_tokens': 5,
    'gen_ai.request.temperature': 0.1,
  });
  t.deepEqual(attributesOf('embeddings', { dimensions: 256, temperature: 1 }), { 'gen_ai.embeddings.dimension.count': 256 });
});

test.serial('a chat completion: the server span with the HTTP conventions and the key id, one CLIENT span with the GenAI conventions', async (t) => {
  upstream.answer('/v1/chat/completions', reply(200, openAIAnswer));
  const key = await gateway.keyFor();
  const response = await post(
    gateway.url,
    '/v1/chat/completions',
    { model: 'gpt-test', temperature: 0.2, max_tokens: 50, messages: [{ role: 'user', content: 'Tell me a secret' }] },
    { authorization: `Bearer ${key}` },
  );
  t.is(response.status, 200);
  await response.json();
  const spans = await requestSpans();
  const server = serverSpan(spans);
  t.is(server.name, 'POST /v1/chat/completions');
  t.like(server.attributes, {
    'http.request.method': 'POST',
    'http.route': '/v1/chat/completions',
    'http.response.status_code': 200,
    'url.path': '/v1/chat/completions',
    'url.scheme': 'http',
    'server.address': '127.0.0.1',
    'server.port': Number(new URL(gateway.url).port),
    'client.address': '127.0.0.1',
    'network.protocol.version': '1.1',
    'kmg.account': 'acme',
    'kmg.model': 'gpt-test',
  });
  t.regex(server.attributes['kmg.key.id'] as string, /^key_/);
  t.is(server.attributes['error.type'], undefined);

  const [client, ...more] = clientSpans(spans);
  t.is(more.length, 0);
  if (!client) return t.fail('no CLIENT span');
  t.is(client.name, 'chat gpt-4o-mini-2024-07-18');
  t.is(parentOf(client), server.spanContext().spanId);
  t.deepEqual(client.attributes, {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'openai',
    'gen_ai.request.model': 'gpt-4o-mini-2024-07-18',
    'gen_ai.request.temperature': 0.2,
    'gen_ai.request.max_tokens': 50,
    'server.address': '127.0.0.1',
    'server.port': Number(new URL(upstream.url).port),
    'kmg.provider.id': 'openai',
    'kmg.model': 'gpt-test',
    'gen_ai.response.id': 'chatcmpl-upstream',
    'gen_ai.response.model': 'gpt-4o-mini-2024-07-18',
    'gen_ai.response.finish_reasons': ['stop'],
    'gen_ai.usage.input_tokens': 10,
    'gen_ai.usage.output_tokens': 4,
    'gen_ai.usage.cache_read.input_tokens': 6,
  });
  t.is(client.status.code, SpanStatusCode.UNSET);
  // The limit check is a span of the request too.
  const consume = spans.find((span) => span.name === 'ModelLimiter.consume');
  t.is(consume && parentOf(consume), server.spanContext().spanId);
});

test.serial('an embeddings call is a CLIENT span of operation embeddings, with its dimensions and input tokens', async (t) => {
  upstream.answer(
    '/v1/embeddings',
    reply(200, {
      object: 'list',
      data: [{ object: 'embedding', index: 0, embedding: [0.5, -0.5] }],
      model: 'text-embedding-3-small',
      usage: { prompt_tokens: 3, total_tokens: 3 },
    }),
  );
  const key = await gateway.keyFor();
  const response = await post(
    gateway.url,
    '/v1/embeddings',
    { model: 'embed-test', input: 'Tell me a secret', dimensions: 2 },
    { authorization: `Bearer ${key}` },
  );
  t.is(response.status, 200);
  await response.json();
  const [client, ...more] = clientSpans(await requestSpans());
  t.is(more.length, 0);
  if (!client) return t.fail('no CLIENT span');
  t.is(client.name, 'embeddings text-embedding-3-small');
  t.like(client.attributes, {
    'gen_ai.operation.name': 'embeddings',
    'gen_ai.provider.name': 'openai',
    'gen_ai.request.model': 'text-embedding-3-small',
    'gen_ai.embeddings.dimension.count': 2,
    'gen_ai.response.model': 'text-embedding-3-small',
    'gen_ai.usage.input_tokens': 3,
    'kmg.model': 'embed-test',
  });
  t.is(client.attributes['gen_ai.input.messages'], undefined, 'no content unless asked');
});

test.serial("the upstream gets the attempt's traceparent; an incoming traceparent is continued", async (t) => {
  upstream.answer('/v1/chat/completions', reply(200, openAIAnswer));
  const key = await gateway.keyFor();
  const incoming = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const response = await post(
    gateway.url,
    '/v1/chat/completions',
    { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] },
    {
      authorization: `Bearer ${key}`,
      traceparent: incoming,
      tracestate: 'vendor=opaque',
    },
  );
  t.is(response.status, 200);
  await response.json();
  const spans = await requestSpans();
  const server = serverSpan(spans);
  t.is(server.spanContext().traceId, '4bf92f3577b34da6a3ce929d0e0e4736');
  t.is(parentOf(server), '00f067aa0ba902b7');
  const [client] = clientSpans(spans);
  if (!client) return t.fail('no CLIENT span');
  const [received] = upstream.received;
  t.is(received?.headers.traceparent, `00-4bf92f3577b34da6a3ce929d0e0e4736-${client.spanContext().spanId}-01`);
  t.is(received?.headers.tracestate, 'vendor=opaque');
});

test.serial('a call to a Gemini model, from a Messages client: the span names the provider gcp.gemini, with its usage and finish', async (t) => {
  upstream.answer(
    '/v1beta/models/gemini-2.5-flash:generateContent',
    reply(200, {
      candidates: [{ content: { role: 'model', parts: [{ text: 'Hi.' }] }, finishReason: 'MAX_TOKENS', index: 0 }],
      usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 5, thoughtsTokenCount: 3, totalTokenCount: 20 },
      modelVersion: 'gemini-2.5-flash-001',
      responseId: 'gemini-response-1',
    }),
  );
  const key = await gateway.keyFor();
  const response = await post(
    gateway.url,
    '/v1/messages',
    { model: 'gemini-test', max_tokens: 5, messages: [{ role: 'user', content: 'Hi' }] },
    { 'x-api-key': key },
  );
  t.is(response.status, 200);
  const [client] = clientSpans(await requestSpans());
  if (!client) return t.fail('no CLIENT span');
  t.like(client.attributes, {
    'gen_ai.provider.name': 'gcp.gemini',
    'gen_ai.request.model': 'gemini-2.5-flash',
    'kmg.provider.id': 'gemini',
    'gen_ai.response.id': 'gemini-response-1',
    'gen_ai.response.model': 'gemini-2.5-flash-001',
    'gen_ai.response.finish_reasons': ['max_tokens'],
    'gen_ai.usage.input_tokens': 12,
    'gen_ai.usage.output_tokens': 8,
  });
});

test.serial(
  "an embeddings call to a Gemini model, its batch over Gemini's 100 a call: one span for the attempt, naming gcp.gemini, the dimensions and the runs' tokens summed",
  async (t) => {
    const EMBED = '/v1beta/models/gemini-embedding-001:batchEmbedContents';
    const vectors = (count: number) => reply(200, { embeddings: Array.from({ length: count }, () => ({ values: [0.5, -0.5] })) });
    upstream.answer(EMBED, vectors(100));
    upstream.answer(EMBED, vectors(1));
    const key = await gateway.keyFor();
    // 101 texts of 8 characters: 200 tokens, then 2, at four characters a token.
    const input = Array.from({ length: 101 }, () => 'abcdefgh');
    const response = await post(gateway.url, '/v1/embeddings', { model: 'gemini-embed-test', input, dimensions: 2 }, { authorization: `Bearer ${key}` });
    t.is(response.status, 200);
    await response.json();
    t.is(upstream.received.length, 2);
    const [client, ...more] = clientSpans(await requestSpans());
    t.is(more.length, 0);
    if (!client) return t.fail('no CLIENT span');
    t.is(client.name, 'embeddings gemini-embedding-001');
    t.like(client.attributes, {
      'gen_ai.operation.name': 'embeddings',
      'gen_ai.provider.name': 'gcp.gemini',
      'kmg.provider.id': 'gemini',
      'gen_ai.request.model': 'gemini-embedding-001',
      'gen_ai.embeddings.dimension.count': 2,
      'gen_ai.usage.input_tokens': 202,
      'kmg.model': 'gemini-embed-test',
    });
  },
);

test.serial('a streamed message: the stream flag, time to first chunk, and what its events report', async (t) => {
  const event = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
  upstream.answer(
    '/v1/messages',
    replyEvents(
      Readable.from([
        event('message_start', {
          type: 'message_start',
          message: {
            id: 'msg_stream',
            type: 'message',
            role: 'assistant',
            model: 'claude-sonnet-4-5-20250929',
            content: [],
            usage: { input_tokens: 5, cache_read_input_tokens: 20, cache_creation_input_tokens: 3, output_tokens: 1 },
          },
        }),
        event('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
        event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Streamed secret' } }),
        event('content_block_stop', { type: 'content_block_stop', index: 0 }),
        event('message_delta', { type: 'message_delta', delta: { stop_reason: 'max_tokens' }, usage: { output_tokens: 7 } }),
        event('message_stop', { type: 'message_stop' }),
      ]),
    ),
  );
  const key = await gateway.keyFor();
  const response = await post(
    gateway.url,
    '/v1/messages',
    { model: 'claude-test', max_tokens: 7, stream: true, messages: [{ role: 'user', content: 'Stream a secret' }] },
    { 'x-api-key': key },
  );
  t.is(response.status, 200);
  t.true((await response.text()).includes('message_stop'));
  const spans = await requestSpans();
  const [client] = clientSpans(spans);
  if (!client) return t.fail('no CLIENT span');
  t.is(client.name, 'chat claude-sonnet-4-5-20250929');
  t.like(client.attributes, {
    'gen_ai.provider.name': 'anthropic',
    'gen_ai.request.stream': true,
    'gen_ai.request.max_tokens': 7,
    'gen_ai.response.id': 'msg_stream',
    'gen_ai.response.model': 'claude-sonnet-4-5-20250929',
    'gen_ai.response.finish_reasons': ['max_tokens'],
    // The conventions count cached input in the input tokens; Messages reports it apart.
    'gen_ai.usage.input_tokens': 28,
    'gen_ai.usage.output_tokens': 7,
    'gen_ai.usage.cache_read.input_tokens': 20,
    'gen_ai.usage.cache_creation.input_tokens': 3,
  });
  const firstChunk = client.attributes['gen_ai.response.time_to_first_chunk'];
  t.true(typeof firstChunk === 'number' && firstChunk > 0);
});

test.serial('a call refused by the limits (429) or by its scope (403): the server span says why, and no attempt was made', async (t) => {
  const limited = await gateway.keyFor([...SCOPES], { requestsPerMinute: 1 });
  upstream.answer('/v1/chat/completions', reply(200, openAIAnswer));
  const body = { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] };
  t.is((await post(gateway.url, '/v1/chat/completions', body, { authorization: `Bearer ${limited}` })).status, 200);
  await requestSpans();
  exporter.reset();
  const refused = await post(gateway.url, '/v1/chat/completions', body, { authorization: `Bearer ${limited}` });
  t.is(refused.status, 429);
  let spans = await requestSpans();
  t.like(serverSpan(spans).attributes, { 'http.response.status_code': 429, 'kmg.limited_by': 'requests', 'kmg.account': 'acme' });
  t.is(serverSpan(spans).status.code, SpanStatusCode.UNSET);
  t.deepEqual(clientSpans(spans), []);

  exporter.reset();
  const noScope = await gateway.keyFor(['models:read']);
  const forbidden = await post(gateway.url, '/v1/chat/completions', body, { authorization: `Bearer ${noScope}` });
  t.is(forbidden.status, 403);
  spans = await requestSpans();
  t.like(serverSpan(spans).attributes, { 'http.response.status_code': 403, 'http.route': '/v1/chat/completions' });
  t.deepEqual(clientSpans(spans), []);
  t.is(upstream.received.length, 1);
});

test.serial('an upstream failure: error.type on the attempt span, the 502 on the server span', async (t) => {
  upstream.answer('/v1/chat/completions', reply(500, { error: { message: 'boom' } }));
  const key = await gateway.keyFor();
  const response = await post(
    gateway.url,
    '/v1/chat/completions',
    { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] },
    { authorization: `Bearer ${key}` },
  );
  t.is(response.status, 502);
  const spans = await requestSpans();
  const [client] = clientSpans(spans);
  t.is(client?.attributes['error.type'], '500');
  t.is(client?.status.code, SpanStatusCode.ERROR);
  t.like(serverSpan(spans).attributes, { 'http.response.status_code': 502, 'error.type': '502' });
  t.is(serverSpan(spans).status.code, SpanStatusCode.ERROR);
});

test.serial('an upload, a list and a download: the store, blob and limit calls are spans of their requests', async (t) => {
  const key = await gateway.keyFor();
  const created = await fetch(`${gateway.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: uploadForm(pdfOf(2000)) });
  t.is(created.status, 200);
  const { id } = (await created.json()) as { id: string };
  let spans = await requestSpans();
  let server = serverSpan(spans);
  t.is(server.name, 'POST /v1/files');
  const children = (of: ReadableSpan, all: ReadableSpan[]) => all.filter((span) => parentOf(span) === of.spanContext().spanId).map((span) => span.name);
  const uploadChildren = children(server, spans);
  t.true(uploadChildren.includes('CreationLimiter.reserve'), uploadChildren.join());
  t.true(uploadChildren.includes('FileStore.create'), uploadChildren.join());
  t.true(
    uploadChildren.some((name) => name === 'BlobStore.put' || name === 'BlobStore.putFile'),
    uploadChildren.join(),
  );

  exporter.reset();
  t.is((await fetch(`${gateway.url}/v1/files`, { headers: { authorization: `Bearer ${key}` } })).status, 200);
  spans = await requestSpans();
  server = serverSpan(spans);
  t.is(server.name, 'GET /v1/files');
  t.true(children(server, spans).includes('FileStore.list'));

  exporter.reset();
  const download = await fetch(`${gateway.url}/v1/files/${id}/content`, { headers: { authorization: `Bearer ${key}` } });
  t.is(download.status, 200);
  t.is((await download.arrayBuffer()).byteLength, 2000);
  spans = await until(
    async () => exporter.getFinishedSpans(),
    (all) => all.some((span) => span.kind === SpanKind.SERVER) && all.some((span) => span.name === 'BlobStore.get'),
  );
  server = serverSpan(spans);
  t.is(server.attributes['http.route'], '/v1/files/:file_id/content');
  t.true(children(server, spans).includes('BlobStore.get'));
});

test.serial("the request's log line carries its trace id", async (t) => {
  upstream.answer('/v1/chat/completions', reply(200, openAIAnswer));
  const key = await gateway.keyFor();
  gateway.logLines.splice(0);
  const response = await post(
    gateway.url,
    '/v1/chat/completions',
    { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] },
    { authorization: `Bearer ${key}` },
  );
  await response.json();
  const spans = await requestSpans();
  const lines = await until(
    async () => gateway.logLines,
    (all) => all.length > 0,
  );
  t.is(lines[0]?.traceId, serverSpan(spans).spanContext().traceId);
});

test.serial('by default no attribute holds the key or any message content; recordContent adds the messages', async (t) => {
  upstream.answer('/v1/chat/completions', reply(200, openAIAnswer), 2);
  const body = {
    model: 'gpt-test',
    messages: [
      { role: 'system', content: 'Be brief' },
      { role: 'user', content: 'Tell me a secret' },
    ],
  };
  const key = await gateway.keyFor();
  t.is((await post(gateway.url, '/v1/chat/completions', body, { authorization: `Bearer ${key}` })).status, 200);
  const everything = JSON.stringify((await requestSpans()).map((span) => span.attributes));
  for (const secret of [key, 'Tell me a secret', 'Be brief', 'A secret answer.']) t.false(everything.includes(secret), secret);

  exporter.reset();
  const recordingKey = await recording.keyFor();
  t.is((await post(recording.url, '/v1/chat/completions', body, { authorization: `Bearer ${recordingKey}` })).status, 200);
  const [client] = clientSpans(await requestSpans());
  t.deepEqual(JSON.parse(client?.attributes['gen_ai.input.messages'] as string), [
    { role: 'system', parts: [{ type: 'text', content: 'Be brief' }] },
    { role: 'user', parts: [{ type: 'text', content: 'Tell me a secret' }] },
  ]);
  t.deepEqual(JSON.parse(client?.attributes['gen_ai.output.messages'] as string), [
    { role: 'assistant', parts: [{ type: 'text', content: 'A secret answer.' }], finish_reason: 'stop' },
  ]);
  const all = JSON.stringify((await requestSpans()).map((span) => span.attributes));
  t.false(all.includes(recordingKey));
});

test.serial('recordContent on a streamed chat call: the output message is the text of its deltas, not of any message field', async (t) => {
  const chunk = (delta: unknown, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: 'chatcmpl-s', object: 'chat.completion.chunk', model: 'gpt-4o-mini-2024-07-18', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  upstream.answer(
    '/v1/chat/completions',
    replyEvents(Readable.from([chunk({ role: 'assistant', content: 'A secret' }), chunk({ content: ' answer.' }), chunk({}, 'stop'), 'data: [DONE]\n\n'])),
  );
  const key = await recording.keyFor();
  const body = { model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'Stream a secret' }] };
  const response = await post(recording.url, '/v1/chat/completions', body, { authorization: `Bearer ${key}` });
  t.is(response.status, 200);
  await response.text();
  const [client] = clientSpans(await requestSpans());
  t.deepEqual(JSON.parse(client?.attributes['gen_ai.output.messages'] as string), [
    { role: 'assistant', parts: [{ type: 'text', content: 'A secret answer.' }], finish_reason: 'stop' },
  ]);
});

test.serial('options are checked when the factory runs', (t) => {
  t.throws(() => traceRequests({ recordContent: 'yes' as unknown as boolean }), { message: /traceRequests\(\): recordContent must be true or false/ });
  t.throws(() => tracedStore({}, 'X', { tracerProvider: {} as never }), { message: /tracedStore\(\): tracerProvider must be a TracerProvider/ });
});

test.serial('a whole Messages answer: its stop reason and usage', async (t) => {
  upstream.answer('/v1/messages', reply(200, anthropicMessage('Done.')));
  const key = await gateway.keyFor();
  const response = await post(
    gateway.url,
    '/v1/messages',
    { model: 'claude-test', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] },
    { 'x-api-key': key },
  );
  t.is(response.status, 200);
  const [client] = clientSpans(await requestSpans());
  t.like(client?.attributes, {
    'gen_ai.response.id': 'msg_upstream',
    'gen_ai.response.finish_reasons': ['end_turn'],
    'gen_ai.usage.input_tokens': 10,
    'gen_ai.usage.output_tokens': 4,
  });
  t.is(client?.attributes['gen_ai.request.stream'], undefined);
});

test.serial('a streamed Responses call to the echo provider: its id, status and usage from the events', async (t) => {
  const key = await gateway.keyFor();
  const response = await post(gateway.url, '/v1/responses', { model: 'echo-1', stream: true, input: 'one two three' }, { authorization: `Bearer ${key}` });
  t.is(response.status, 200);
  await response.text();
  const [client] = clientSpans(await requestSpans());
  if (!client) return t.fail('no CLIENT span');
  t.is(client.name, 'chat echo-upstream-1');
  t.like(client.attributes, { 'gen_ai.provider.name': 'local', 'gen_ai.request.stream': true, 'gen_ai.response.finish_reasons': ['completed'] });
  t.regex(String(client.attributes['gen_ai.response.id']), /^resp_/);
  t.true(typeof client.attributes['gen_ai.usage.input_tokens'] === 'number' && typeof client.attributes['gen_ai.usage.output_tokens'] === 'number');
  t.is(client.attributes['server.address'], undefined);
});

test.serial('an answer that is not JSON: error.type malformed_answer', async (t) => {
  upstream.answer('/v1/chat/completions', reply(200, 'not json at all'));
  const key = await gateway.keyFor();
  const response = await post(
    gateway.url,
    '/v1/chat/completions',
    { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] },
    { authorization: `Bearer ${key}` },
  );
  t.is(response.status, 502);
  const [client] = clientSpans(await requestSpans());
  t.is(client?.attributes['error.type'], 'malformed_answer');
  t.is(client?.status.code, SpanStatusCode.ERROR);
});

test.serial('an upstream that stays silent: error.type timeout, and the 504 on the server span', async (t) => {
  // Answers nothing, until the gateway gives up.
  upstream.answer('/v1/chat/completions', () => undefined);
  const key = await impatient.keyFor();
  const response = await post(
    impatient.url,
    '/v1/chat/completions',
    { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] },
    { authorization: `Bearer ${key}` },
  );
  t.is(response.status, 504);
  const spans = await requestSpans();
  const [client] = clientSpans(spans);
  t.is(client?.attributes['error.type'], 'timeout');
  t.like(serverSpan(spans).attributes, { 'http.response.status_code': 504, 'error.type': '504' });
});

test.serial('a retried call: one client span per attempt, siblings under the server span', async (t) => {
  upstream.answer('/v1/chat/completions', reply(503, { error: { message: 'overloaded' } }));
  upstream.answer(
    '/v1/chat/completions',
    reply(200, {
      id: 'c',
      object: 'chat.completion',
      created: 1,
      model: 'up',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
    }),
  );
  const key = await retrying.keyFor();
  const response = await post(
    retrying.url,
    '/v1/chat/completions',
    { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] },
    { authorization: `Bearer ${key}` },
  );
  t.is(response.status, 200);
  const spans = await requestSpans();
  const server = serverSpan(spans);
  const [failed, answered, ...more] = clientSpans(spans).sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
  t.is(more.length, 0);
  t.is(failed && parentOf(failed), server.spanContext().spanId);
  t.is(answered && parentOf(answered), server.spanContext().spanId);
  t.is(failed?.attributes['error.type'], '503');
  t.is(answered?.attributes['error.type'], undefined);
});

test.serial('a client that leaves mid-stream: both spans say cancelled', async (t) => {
  const events = new PassThrough();
  upstream.answer('/v1/chat/completions', replyEvents(events));
  const key = await gateway.keyFor();
  const controller = new AbortController();
  // The answer's status and headers go with its first event.
  const responding = fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    signal: controller.signal,
  });
  events.write(
    `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'gpt', choices: [{ index: 0, delta: { content: 'Hel' } }] })}\n\n`,
  );
  const response = await responding;
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  await reader.read();
  controller.abort();
  const spans = await until(
    async () => exporter.getFinishedSpans(),
    (all) => all.some((span) => span.kind === SpanKind.SERVER) && all.some((span) => span.kind === SpanKind.CLIENT),
  );
  events.end();
  const [client] = clientSpans(spans);
  t.is(client?.attributes['error.type'], 'cancelled');
  t.is(serverSpan(spans).attributes['error.type'], 'cancelled');
  t.is(typeof client?.attributes['gen_ai.response.time_to_first_chunk'], 'number');
});

test.serial('a translated call: one CLIENT span for the provider that answered, its upstream model and usage, and no content', async (t) => {
  upstream.answer('/v1/messages', reply(200, anthropicMessage('A translated secret.')));
  const key = await gateway.keyFor();
  const response = await post(
    gateway.url,
    '/v1/chat/completions',
    { model: 'claude-test', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] },
    { authorization: `Bearer ${key}` },
  );
  t.is(response.status, 200);
  t.like(await response.json(), { object: 'chat.completion', model: 'claude-test' });
  t.deepEqual(
    upstream.received.map((request) => request.path),
    ['/v1/messages'],
  );
  const spans = await requestSpans();
  const [client, ...more] = clientSpans(spans);
  t.is(more.length, 0);
  if (!client) return t.fail('no CLIENT span');
  t.is(parentOf(client), serverSpan(spans).spanContext().spanId);
  t.is(client.name, 'chat claude-sonnet-4-5-20250929');
  t.like(client.attributes, {
    'gen_ai.provider.name': 'anthropic',
    'gen_ai.request.model': 'claude-sonnet-4-5-20250929',
    'gen_ai.request.max_tokens': 20,
    'server.port': Number(new URL(upstream.url).port),
    'kmg.model': 'claude-test',
    'gen_ai.response.id': 'msg_upstream',
    'gen_ai.usage.input_tokens': 10,
    'gen_ai.usage.output_tokens': 4,
  });
  for (const value of Object.values(client.attributes)) t.false(String(value).includes('secret'));
});
