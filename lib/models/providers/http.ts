import { Pool } from 'undici';
import type { z } from 'zod';
import { httpBaseUrl, nonEmptyString, settingsObject } from '../../settings/schemas.js';
import type { ProviderAnswer, ProviderRequest, ProviderTelemetry } from '../provider.js';
import { UPSTREAM_CALL, type CallRequest } from '../upstream-call.js';

/**
 * The options of a provider reached over HTTP: `id`, `baseURL` (default: the provider's public
 * API) and `apiKey`, the provider's own credential (never a client's gateway key), sent only
 * when set.
 */
export const httpProviderOptions = settingsObject({
  id: nonEmptyString,
  baseURL: httpBaseUrl.optional(),
  apiKey: nonEmptyString.optional(),
});

export type HttpProviderOptions = z.input<typeof httpProviderOptions>;

/** The headers of one kind of call: of a JSON answer and of a streamed one. */
export interface CallHeaders {
  json: Record<string, string>;
  stream: Record<string, string>;
}

/** `headers` (the provider's own: credentials, versions) with the content type and what to accept, for either kind of call. */
export function callHeaders(headers: Readonly<Record<string, string>>): CallHeaders {
  const base = { 'content-type': 'application/json' };
  return { json: { ...base, accept: 'application/json', ...headers }, stream: { ...base, accept: 'text/event-stream', ...headers } };
}

/** What a call upstream needs of the gateway's request: the signal that aborts it, and its trace headers. */
export type UpstreamRequest = Pick<ProviderRequest, 'signal' | 'traceHeaders'>;

/** POSTs a request's body as JSON to one endpoint of an upstream, with `headers` as the body asks: streamed or not. */
export type PostJson = (headers: CallHeaders, request: ProviderRequest) => Promise<ProviderAnswer>;

/** One upstream API: a keep-alive connection pool to its origin. */
export interface HttpUpstream {
  /** The endpoint at `path`, below the base URL. */
  endpoint(path: string): PostJson;
  /** POSTs `body` as JSON to `path` (below the base URL, a query string allowed) with `headers`, aborted by `call.signal`. */
  post(path: string, headers: Readonly<Record<string, string>>, body: unknown, call: UpstreamRequest): Promise<ProviderAnswer>;
  /** Closes the pool's connections; a call still under way fails (as when its upstream drops it). */
  close(): Promise<void>;
  /** `providerName` with the upstream's host and port, for a provider's `telemetry`. */
  telemetry(providerName: string): ProviderTelemetry;
}

/**
 * The upstream at `baseURL`: one undici `Pool` of keep-alive connections to its origin, made
 * once, for every call of the provider. Redirects are never followed (undici's `request()`
 * follows none): a 3xx answer is a 502 like any other unexpected status, so the body (attached
 * PDFs included) and the credentials never go where the upstream names. undici's own timeouts
 * are off: the model handlers' idle timeout (`timeoutMs`) is the one that applies.
 * @example const chat = httpUpstream('https://api.openai.com/v1').endpoint('/chat/completions')
 */
export function httpUpstream(baseURL: string): HttpUpstream {
  const base = new URL(baseURL);
  const prefix = base.pathname.replace(/\/+$/, '');
  const pool = new Pool(base.origin, { headersTimeout: 0, bodyTimeout: 0 });
  const withQuery = (path: string) => (base.search === '' ? `${prefix}${path}` : `${prefix}${path}${path.includes('?') ? '&' : '?'}${base.search.slice(1)}`);
  return {
    post(path, headers, body, { signal, traceHeaders }) {
      const sent = traceHeaders === undefined ? headers : { ...headers, ...traceHeaders };
      return pool.request({ path: withQuery(path), method: 'POST', headers: sent, body: JSON.stringify(body), signal });
    },
    endpoint(path) {
      const fullPath = withQuery(path);
      return (headers, request) => {
        const { body, traceHeaders } = request;
        const sent = body.stream === true ? headers.stream : headers.json;
        // A traced call's headers are made per call; the others are the provider's, made once.
        const withTrace = traceHeaders === undefined ? sent : { ...sent, ...traceHeaders };
        // The model handlers' call has a cheaper abort emitter than the request's signal; another caller's request, only its signal.
        const signal = (request as Partial<CallRequest>)[UPSTREAM_CALL]?.abortSource ?? request.signal;
        return pool.request({ path: fullPath, method: 'POST', headers: withTrace, body: JSON.stringify(body), signal });
      };
    },
    close: () => pool.destroy(),
    telemetry: (providerName) => ({
      providerName,
      serverAddress: base.hostname,
      serverPort: base.port === '' ? (base.protocol === 'https:' ? 443 : 80) : Number(base.port),
    }),
  };
}

/** `promise`, or a rejection as soon as `signal` aborts (a credential that stalls does not hold a call past its timeout). */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
