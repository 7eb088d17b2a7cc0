import { Readable } from 'node:stream';
import type { TokenUsage } from '../../usage/token-usage.js';
import type { JsonObject } from '../content.js';
import { UpstreamStatusError, type NeutralCall, type NeutralProtocol, type ProviderAnswer, type ProviderRequest } from '../provider.js';
import { DEFAULT_MAX_UPSTREAM_BYTES, UPSTREAM_CALL, type CallRequest } from '../upstream-call.js';
import { ClientStream } from './client-stream.js';
import type { StreamPart } from './neutral.js';
import type { Translation } from './translate.js';
import { checkToolChoice, type WireFormat } from './wire-format.js';

const JSON_HEADERS = { 'content-type': 'application/json' };
const EVENT_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8' };

/**
 * An upstream's HTTP error thrown by a neutral provider, as the HTTP answer a provider of a client
 * format gives: the relay and routing then read its status, message and `retry-after` as they
 * read any upstream's (refused or 502, retried, cooled down).
 */
export function statusAnswer(err: UpstreamStatusError): ProviderAnswer {
  return {
    statusCode: err.status,
    headers: { ...JSON_HEADERS, ...(err.retryAfter !== undefined && { 'retry-after': err.retryAfter }) },
    body: Readable.from([JSON.stringify({ error: { message: err.message, ...(err.code !== undefined && { code: err.code }) } })]),
  };
}

/** `promise`, or the signal's reason once it aborts: a provider that misses the signal never holds the call. */
function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * How a call in `from`'s format reaches a provider of the neutral representation: the client's
 * reader, the provider's `check()`, then its `generate()` or `stream()`, the answer written by the
 * client's writer. The answer is an HTTP answer as a translated one is, so that the relay, usage,
 * routing and caching treat both alike.
 */
export function neutralTranslation(from: WireFormat, protocol: NeutralProtocol): Translation {
  const read = (body: JsonObject, headers: Readonly<Record<string, string>>) => {
    const betas = from.client.checkHeaders?.(headers, protocol.name) ?? [];
    const request = from.client.readRequest(body, protocol.name);
    checkToolChoice(request);
    const left = protocol.check?.(request) ?? [];
    return { request, omitted: [...new Set([...request.omitted, ...left, ...betas])] };
  };
  return {
    target: 'neutral',
    check: (body, headers) => read(body, headers).omitted,
    async send(providerRequest) {
      const { request, omitted } = read(providerRequest.body, providerRequest.headers);
      const { signal } = providerRequest;
      signal.throwIfAborted();
      const call: NeutralCall = {
        request,
        headers: providerRequest.headers,
        signal,
        traceHeaders: providerRequest.traceHeaders,
        maxBytes: maxBytesOf(providerRequest),
      };
      const usage: TokenUsage = { inputTokens: 0, outputTokens: 0 };
      try {
        if (!request.stream) {
          const answer = await unlessAborted(protocol.generate(call), signal);
          Object.assign(usage, answer.usage);
          const body = Readable.from([JSON.stringify(from.client.writeAnswer(answer, request))]);
          return { statusCode: 200, headers: JSON_HEADERS, body, usage, omitted };
        }
        const parts = protocol.stream(call)[Symbol.asyncIterator]();
        // The first part before the answer: a failure until then is the call's status, and may be retried.
        const first = await unlessAborted(parts.next(), signal);
        const client = new ClientStream(from.client.streamWriter(request), usage);
        return { statusCode: 200, headers: EVENT_HEADERS, body: Readable.from(events(first, parts, client, signal), { objectMode: false }), usage, omitted };
      } catch (err) {
        if (err instanceof UpstreamStatusError) return { ...statusAnswer(err), usage, omitted };
        throw err;
      }
    },
  };
}

/** The client's events, part by part as the provider yields them; the provider's iteration stopped when they are. */
async function* events(first: IteratorResult<StreamPart>, parts: AsyncIterator<StreamPart>, client: ClientStream, signal: AbortSignal): AsyncGenerator<string> {
  try {
    for (let next = first; next.done !== true; next = await unlessAborted(parts.next(), signal)) {
      const out = client.write([next.value]);
      if (out !== '') yield out;
    }
    yield client.end();
  } finally {
    // Not awaited: a provider that misses the signal would hold the client's stream until it yields again.
    parts.return?.().catch(() => undefined);
  }
}

function maxBytesOf(request: ProviderRequest): number {
  return (request as Partial<CallRequest>)[UPSTREAM_CALL]?.maxBytes ?? DEFAULT_MAX_UPSTREAM_BYTES;
}
