import type { Readable } from 'node:stream';
import type { Provider, ProviderAnswer, ProviderEndpoint } from '../models/provider.js';
import { eventFields, EventSplitter } from '../http/server-sent-events.js';
import { providerAnswer } from '../models/upstream-call.js';
import { eventObject } from '../models/answer.js';
import { isObject, type JsonObject } from '../models/content.js';
import type { FormatSample } from '../models/formats/format.js';
import { FORMATS, TRANSLATIONS, type FormatEndpoint } from '../models/formats/registry.js';
import { CATALOG_MODEL, contractGateway, UPSTREAM_MODEL, type ContractGateway } from './contract-gateway.js';
import { mockUpstream, type Arrival, type MockUpstream } from './mock-upstream.js';

/** The assertions the suite uses: a part of AVA's `t` (any test runner's context of this shape will do). */
export interface ContractAssertions {
  is(actual: unknown, expected: unknown, message?: string): unknown;
  deepEqual(actual: unknown, expected: unknown, message?: string): unknown;
  true(actual: unknown, message?: string): unknown;
}

/** A test runner's `test(title, implementation)`, as AVA's default export is one. */
export type ContractTest = (title: string, implementation: (t: ContractAssertions) => Promise<void>) => void;

/** How the suite's mock upstream answers for one endpoint format of the provider, in the upstream API's own format. */
export interface UpstreamScript {
  /** The path the provider posts to, base URL included: `/v1/chat/completions` for an `openAIProvider` of base `${url}/v1`. */
  path: string;
  /** The upstream's JSON answer to a call that is not streamed. */
  answer: unknown;
  /**
   * The upstream's answer to a streamed call, one whole event each (`data: {...}\n\n`, or the
   * bytes of a binary framing), at least two; left out for a format that never streams (`countTokens`).
   */
  events?: readonly (string | Uint8Array)[];
  /** The content type of a streamed answer. Default: `text/event-stream` (Bedrock's: `application/vnd.amazon.eventstream`). */
  eventsContentType?: string;
  /** The upstream's error body for a refusal with `message`. Default: `{ error: { type: 'invalid_request_error', message } }`. */
  error?(status: number, message: string): unknown;
  /** The tokens that `answer` and `events` report, which the gateway must count. Left out: not checked. */
  usage?: { inputTokens: number; outputTokens: number };
}

/** What `providerContract()` runs against. */
export type ProviderContractOptions = {
  /** Starts every test's title. */
  name: string;
} & (
  | {
      /** Makes the provider under test, calling the API at `baseURL` (the suite's mock upstream, one per test). */
      create(baseURL: string): Provider;
      /**
       * The endpoint formats the provider speaks, and how its upstream answers in each; `neutral`
       * for a provider of the neutral representation (`Provider.neutral`), which every chat
       * format's client reaches (`path`: where its JSON answers are asked for).
       */
      upstream: Partial<Record<ProviderEndpoint | 'neutral', UpstreamScript>>;
    }
  | {
      /** Makes the provider under test: one that calls no upstream (as `echoProvider()`). */
      create(): Provider;
      /** The endpoint formats it speaks. */
      offline: readonly ProviderEndpoint[];
    }
);

/** What a client of one endpoint format sends, and what it must get back: the format's sample call at its path. */
interface ClientFormat extends Omit<FormatSample, 'request'> {
  path: string;
  request: (stream: boolean) => JsonObject;
}

const CLIENTS = Object.fromEntries(
  Object.values(FORMATS).map(({ endpoint, path, sample }) => [
    endpoint,
    { ...sample, path, request: (stream: boolean) => sample.request(CATALOG_MODEL, stream) },
  ]),
) as Record<ProviderEndpoint, ClientFormat>;

// The timeout of an upstream that never answers: any length shows it, the shortest costs least.
const SHORT_TIMEOUT_MS = 200;
// The timeout of a stream silent after its first event. The stream's start, which can take seconds
// on a busy machine while the other tests of a file start with it, is bounded by USUAL_TIMEOUT_MS.
const STREAM_TIMEOUT_MS = 5_000;
const USUAL_TIMEOUT_MS = 300_000;
const REDIRECTS = [301, 302, 307, 308];
const FAILURES: Array<[upstream: number, client: number]> = [
  [400, 400],
  [422, 422],
  [429, 429],
  [401, 502],
  [404, 502],
  [500, 502],
  [503, 502],
];

/** The data of each event of `text`. */
function eventData(text: string): string[] {
  const splitter = new EventSplitter();
  return [...splitter.push(text), ...splitter.end()].map((event) => eventFields(event).data ?? '');
}

/** An event's data that tells a failure, in any format: `{ error: {...} }`, `type` `error` or `response.failed`. */
function isErrorEvent(data: string): boolean {
  const parsed = eventObject(data);
  return parsed !== undefined && (isObject(parsed.error) || parsed.type === 'error' || parsed.type === 'response.failed');
}

/** Starts a streamed answer of `script`'s content type and writes `events`. */
const writeEvents = (res: Arrival['res'], script: UpstreamScript, events: readonly (string | Uint8Array)[]) => {
  res.writeHead(200, { 'content-type': script.eventsContentType ?? 'text/event-stream' });
  for (const event of events) res.write(event);
};

/** A test's world: a mock upstream answering as `handle` does, a provider calling it, a gateway in front. */
async function world(options: ProviderContractOptions, handle: (arrival: Arrival) => void, timeoutMs = USUAL_TIMEOUT_MS, budgetMs?: number) {
  let upstream: MockUpstream | undefined;
  let provider: Provider;
  if ('upstream' in options) {
    upstream = await mockUpstream(handle);
    provider = options.create(upstream.url);
  } else {
    provider = options.create();
  }
  const gateway = await contractGateway(provider, timeoutMs, budgetMs);
  return {
    gateway,
    received: upstream?.received ?? [],
    post: (client: ClientFormat, body: Record<string, unknown>, signal?: AbortSignal) =>
      fetch(`${gateway.url}${client.path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${gateway.key}`, 'x-api-key': gateway.key, ...client.headers },
        body: JSON.stringify(body),
        ...(signal && { signal }),
      }),
    close: async () => {
      await gateway.close();
      await provider.close?.();
      await upstream?.close();
    },
  };
}

/** Runs `body` in a new world, closed whatever happens. */
async function inWorld(
  options: ProviderContractOptions,
  handle: (arrival: Arrival) => void,
  body: (w: Awaited<ReturnType<typeof world>>) => Promise<void>,
  timeoutMs?: number,
  budgetMs?: number,
): Promise<void> {
  const w = await world(options, handle, timeoutMs, budgetMs);
  try {
    await body(w);
  } finally {
    await w.close();
  }
}

const json = (res: Arrival['res'], status: number, body: unknown, headers: Record<string, string> = {}) =>
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));

/** Checks that `body` is a JSON answer of `client`'s format, naming the catalog id where the format names a model. */
function checkAnswer(t: ContractAssertions, client: ClientFormat, body: Record<string, unknown>): void {
  const [description, check] = client.answer;
  t.true(check(body), `the answer has ${description}`);
  if (client.namesModel) t.is(body.model, CATALOG_MODEL, 'the answer names the catalog id');
}

/** Where the client's key shows in what the upstream received: nowhere, for a provider that passes. */
function keyLeaks(gateway: ContractGateway, arrival: Arrival): string[] {
  const parts = { path: arrival.path, headers: JSON.stringify(arrival.headers), body: arrival.body };
  return Object.entries(parts)
    .filter(([, text]) => text.includes(gateway.secret))
    .map(([part]) => part);
}

function checkUsage(t: ContractAssertions, gateway: ContractGateway, script: UpstreamScript | undefined): void {
  if (script?.usage === undefined) return;
  const [call] = gateway.calls.slice(-1);
  t.deepEqual(call && { inputTokens: call.inputTokens, outputTokens: call.outputTokens }, script.usage, 'the gateway counts the tokens the upstream reported');
}

/** The suite for one endpoint format of a provider that calls an upstream. */
function upstreamTests(test: ContractTest, options: ProviderContractOptions, endpoint: ProviderEndpoint, script: UpstreamScript, through = ''): void {
  const client = CLIENTS[endpoint];
  const title = `${options.name}: ${through}${endpoint}:`;
  const { ends } = client;
  // A format that never streams is never asked to.
  const events = ends === null ? undefined : script.events;

  test(`${title} a JSON answer reaches the client in the endpoint's format, asked of the upstream model with the client's key nowhere`, async (t) => {
    await inWorld(
      options,
      ({ res }) => json(res, 200, script.answer),
      async ({ gateway, post, received }) => {
        const answer = await post(client, client.request(false));
        t.is(answer.status, 200);
        checkAnswer(t, client, (await answer.json()) as Record<string, unknown>);
        t.deepEqual(
          received.map((arrival) => arrival.path),
          [script.path],
          'one call, to the scripted path',
        );
        const [arrival] = received;
        t.true(arrival !== undefined && `${arrival.path} ${arrival.body}`.includes(UPSTREAM_MODEL), 'the upstream is asked for the upstream model');
        t.deepEqual(arrival && keyLeaks(gateway, arrival), [], "the client's key is never sent upstream");
        checkUsage(t, gateway, script);
      },
    );
  });

  if (events !== undefined) {
    test(`${title} a stream reaches the client event by event, whole, the client's key nowhere`, async (t) => {
      // Resolving again is a no-op: the first chunk the client reads releases the last event.
      let release = () => {};
      const released = new Promise<void>((resolve) => (release = resolve));
      const handle = ({ res }: Arrival) => {
        writeEvents(res, script, events.slice(0, -1));
        // The last event only once the client has seen the first: a provider that buffers never gets it.
        void released.then(() => res.end(events.at(-1)));
      };
      await inWorld(options, handle, async ({ gateway, post, received }) => {
        const answer = await post(client, client.request(true));
        t.is(answer.status, 200);
        t.true(/^text\/event-stream/.test(answer.headers.get('content-type') ?? ''), 'an event stream');
        const reader = (answer.body as ReadableStream<Uint8Array>).getReader();
        const decoder = new TextDecoder();
        let text = '';
        for (let read = await reader.read(); !read.done; read = await reader.read()) {
          release();
          text += decoder.decode(read.value, { stream: true });
        }
        const data = eventData(text);
        t.true(ends !== null && data.some(ends), 'the stream ends as the format ends a complete one');
        t.true(!data.some(isErrorEvent), 'no error event');
        const [arrival] = received;
        t.deepEqual(arrival && keyLeaks(gateway, arrival), [], "the client's key is never sent upstream");
        checkUsage(t, gateway, script);
      });
    });

    test(`${title} a client that goes away closes the upstream call, before its answer and during its stream`, async (t) => {
      const arrivals: Arrival[] = [];
      let arrived = () => {};
      const handle = (arrival: Arrival) => {
        arrivals.push(arrival);
        // The second call gets its headers and first event, then nothing: a stream still under way.
        if (arrivals.length === 2) {
          writeEvents(arrival.res, script, events.slice(0, 1));
        }
        arrived();
      };
      const nextArrival = () => new Promise<void>((resolve) => (arrived = resolve));
      await inWorld(options, handle, async ({ post }) => {
        const before = new AbortController();
        const called = nextArrival();
        const silent = post(client, client.request(true), before.signal).catch(() => 'aborted');
        await called;
        before.abort();
        await silent;
        let closedBefore = false;
        await arrivals[0]?.closed.then(() => (closedBefore = true));
        t.true(closedBefore, 'the upstream call of a client gone before the answer is closed');

        const during = new AbortController();
        const streaming = await post(client, client.request(true), during.signal);
        t.is(streaming.status, 200);
        during.abort();
        let closedDuring = false;
        await arrivals[1]?.closed.then(() => (closedDuring = true));
        t.true(closedDuring, 'the upstream call of a client gone during the stream is closed');
      });
    });
  }

  test(`${title} an upstream silent past timeoutMs is a 504 and its call is closed`, async (t) => {
    const arrivals: Arrival[] = [];
    await inWorld(
      options,
      (arrival) => arrivals.push(arrival),
      async ({ post }) => {
        const answer = await post(client, client.request(false));
        t.is(answer.status, 504);
        await answer.arrayBuffer();
        await arrivals[0]?.closed;
      },
      SHORT_TIMEOUT_MS,
    );
  });

  if (events !== undefined) {
    test(`${title} a stream silent past timeoutMs after its first event stops short with an error event, and its call is closed`, async (t) => {
      const arrivals: Arrival[] = [];
      const handle = (arrival: Arrival) => {
        arrivals.push(arrival);
        writeEvents(arrival.res, script, events.slice(0, 1));
      };
      await inWorld(
        options,
        handle,
        async ({ post }) => {
          const streamed = await post(client, client.request(true));
          t.is(streamed.status, 200, 'the first event reached the gateway before the timeout');
          const data = eventData(await streamed.text());
          t.true(ends !== null && !data.some(ends), 'the stream stopped short');
          t.true(data.some(isErrorEvent), 'with an error event');
          await arrivals[0]?.closed;
        },
        STREAM_TIMEOUT_MS,
        USUAL_TIMEOUT_MS,
      );
    });
  }

  test(`${title} a redirect is never followed: 502, and nothing reaches where it points`, async (t) => {
    const elsewhere = await mockUpstream(({ res }) => json(res, 200, script.answer));
    try {
      let status = 0;
      const handle = ({ res }: Arrival) => res.writeHead(status, { location: `${elsewhere.url}${script.path}` }).end();
      await inWorld(options, handle, async ({ post }) => {
        for (status of REDIRECTS) {
          const answer = await post(client, client.request(false));
          t.is(answer.status, 502, `after a ${status}`);
          await answer.arrayBuffer();
        }
        t.deepEqual(
          elsewhere.received.map((arrival) => arrival.path),
          [],
        );
      });
    } finally {
      await elsewhere.close();
    }
  });

  test(`${title} upstream refusals (400, 422, 429) keep their status and message, other failures are 502`, async (t) => {
    const message = 'the upstream says no';
    let status = 0;
    const handle = ({ res }: Arrival) => {
      const body = script.error ? script.error(status, message) : { error: { type: 'invalid_request_error', message } };
      json(res, status, body, status === 429 ? { 'retry-after': '7' } : {});
    };
    await inWorld(options, handle, async ({ post }) => {
      for (const [upstreamStatus, clientStatus] of FAILURES) {
        status = upstreamStatus;
        const answer = await post(client, client.request(false));
        t.is(answer.status, clientStatus, `upstream ${upstreamStatus}`);
        const body = (await answer.json()) as { type?: unknown; error?: { message?: unknown } };
        if (client.shapeB) t.is(body.type, 'error', 'a Shape B error');
        if (clientStatus !== 502) t.is(body.error?.message, message, `the upstream's message of its ${upstreamStatus}`);
        if (upstreamStatus === 429) t.is(answer.headers.get('retry-after'), '7', "a 429's retry-after");
      }
    });
  });
}

/** Why a provider's answer, given an aborted signal, settles: it rejected, or its body ended early. */
async function abortedAnswer(call: Promise<ProviderAnswer | Response>): Promise<'rejected' | 'body ended'> {
  let answer: ProviderAnswer;
  try {
    answer = providerAnswer(await call);
  } catch {
    return 'rejected';
  }
  const body: Readable = answer.body;
  body.on('error', () => undefined).resume();
  if (!body.destroyed) await new Promise((resolve) => body.once('close', resolve));
  return 'body ended';
}

/** The chat formats a provider of the neutral representation is reached from. */
const NEUTRAL_CLIENTS = Object.keys(TRANSLATIONS) as FormatEndpoint[];

/** The suite of a provider of the neutral representation: each chat format's, through it, and its aborted calls. */
function neutralTests(test: ContractTest, options: ProviderContractOptions, script: UpstreamScript): void {
  if (script.events !== undefined && script.events.length < 2) {
    throw new TypeError('koa-model-gateway: providerContract(): upstream.neutral.events must hold at least two events');
  }
  for (const endpoint of NEUTRAL_CLIENTS) upstreamTests(test, options, endpoint, script, 'neutral via ');

  test(`${options.name}: neutral: a call whose signal is already aborted sends nothing upstream and settles`, async (t) => {
    const upstream = await mockUpstream(({ res }) => json(res, 200, script.answer));
    const provider = 'upstream' in options ? options.create(upstream.url) : options.create();
    try {
      const face = provider.neutral;
      t.true(face !== undefined, 'the provider speaks the neutral representation');
      if (face === undefined) return;
      const request = TRANSLATIONS.chatCompletions.client.readRequest({ model: UPSTREAM_MODEL, messages: [{ role: 'user', content: 'Hello' }] }, face.name);
      const call = (stream: boolean) => ({ request: { ...request, stream }, headers: {}, signal: AbortSignal.abort(), maxBytes: 1024 * 1024 });
      const settled = (promise: Promise<unknown>) =>
        promise.then(
          () => 'resolved',
          () => 'rejected',
        );
      const parts = face.stream(call(true))[Symbol.asyncIterator]();
      const [generated, streamed] = [await settled(face.generate(call(false))), await settled(parts.next())];
      t.deepEqual([generated, streamed], ['rejected', 'rejected'], 'generate() and stream() reject');
      t.is(upstream.received.length, 0, 'nothing is sent upstream');
    } finally {
      await provider.close?.();
      await upstream.close();
    }
  });
}

/** The suite for one endpoint format of a provider that calls no upstream. */
function offlineTests(test: ContractTest, options: ProviderContractOptions, endpoint: ProviderEndpoint): void {
  const client = CLIENTS[endpoint];
  const title = `${options.name}: ${endpoint}:`;
  test(`${title} a JSON answer and a stream reach the client in the endpoint's format`, async (t) => {
    await inWorld(
      options,
      () => undefined,
      async ({ post }) => {
        const answer = await post(client, client.request(false));
        t.is(answer.status, 200);
        checkAnswer(t, client, (await answer.json()) as Record<string, unknown>);
        const { ends } = client;
        if (ends === null) return;
        const streamed = await post(client, client.request(true));
        t.true(/^text\/event-stream/.test(streamed.headers.get('content-type') ?? ''), 'an event stream');
        t.true(eventData(await streamed.text()).some(ends), 'the stream ends as the format ends a complete one');
      },
    );
  });
}

/**
 * The contract every provider keeps, as tests of `test` (AVA's default export, or any runner's
 * function of that shape), one set per endpoint format it speaks. For a provider that calls an
 * upstream, each test starts a mock upstream on a loopback port answering as `upstream` scripts,
 * makes the provider with its URL, and serves it behind `modelsRouter()`: a JSON answer and a
 * stream reach the client in the endpoint's format, the stream event by event; the client's key
 * never reaches the upstream; a client that goes away closes the upstream call (the provider
 * heeds the request's `signal`); a silent upstream is a 504 within `timeoutMs` (an error event in a stream); a redirect is
 * never followed; upstream refusals keep their status and message, other failures are 502. For
 * every provider, a call whose signal is already aborted sends nothing upstream and settles. A
 * provider that fails one of these hangs its test until the runner's timeout, or fails an assertion.
 * @example
 * import test from 'ava';
 * import { providerContract } from 'koa-model-gateway/testing';
 * providerContract(test, {
 *   name: 'my provider',
 *   create: (baseURL) => myProvider({ id: 'mine', baseURL }),
 *   upstream: { chatCompletions: { path: '/chat', answer: { ... }, events: ['data: {...}\n\n', 'data: [DONE]\n\n'] } },
 * });
 */
export function providerContract(test: ContractTest, options: ProviderContractOptions): void {
  const scripts = 'upstream' in options ? options.upstream : undefined;
  const neutral = scripts?.neutral;
  if (neutral !== undefined) neutralTests(test, options, neutral);
  const endpoints = scripts ? (Object.keys(scripts).filter((key) => key !== 'neutral') as ProviderEndpoint[]) : 'offline' in options ? options.offline : [];
  for (const endpoint of endpoints) {
    const script = scripts?.[endpoint];
    // The stream test holds the last event back until the client has read the others.
    if (script?.events !== undefined && script.events.length < 2) {
      throw new TypeError(`koa-model-gateway: providerContract(): upstream.${endpoint}.events must hold at least two events`);
    }
    if (script) upstreamTests(test, options, endpoint, script);
    else offlineTests(test, options, endpoint);

    test(`${options.name}: ${endpoint}: a call whose signal is already aborted sends nothing upstream and settles`, async (t) => {
      const upstream = await mockUpstream(({ res }) => json(res, 200, script?.answer ?? {}));
      const provider = 'upstream' in options ? options.create(upstream.url) : options.create();
      try {
        const send = provider[endpoint];
        t.true(send !== undefined, `the provider speaks ${endpoint}`);
        const client = CLIENTS[endpoint];
        const body = { ...client.request(client.ends !== null), model: UPSTREAM_MODEL };
        const settled = send && (await abortedAnswer(send.call(provider, { body, headers: {}, signal: AbortSignal.abort() })));
        t.true(settled === 'rejected' || settled === 'body ended', 'it rejects, or answers with a body that ends');
        t.is(upstream.received.length, 0, 'nothing is sent upstream');
      } finally {
        await provider.close?.();
        await upstream.close();
      }
    });
  }
}
