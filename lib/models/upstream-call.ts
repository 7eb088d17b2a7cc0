import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { GatewayError, errors } from '../errors/gateway-error.js';
import type { AttemptTrace } from '../state.js';
import { isObject, type JsonObject } from './content.js';
import type { ProviderAnswer, ProviderRequest } from './provider.js';

// The refusals whose status and message reach the client (decisions.md); any other status is 502.
const REFUSALS = new Set([400, 413, 422, 429]);
const SECONDS = /^\d+$/;

/** The default of `maxUpstreamBytes`: the largest JSON answer, or event of a stream, an upstream may send. */
export const DEFAULT_MAX_UPSTREAM_BYTES = 32 * 1024 * 1024;

/** A provider's answer as a `ProviderAnswer`: a fetch `Response` becomes one, its body a Node stream. */
export function providerAnswer(answer: ProviderAnswer | Response): ProviderAnswer {
  if (typeof (answer as Partial<ProviderAnswer>).statusCode === 'number') return answer as ProviderAnswer;
  const response = answer as Response;
  return {
    statusCode: response.status,
    headers: Object.fromEntries(response.headers),
    body: response.body === null ? Readable.from([]) : Readable.fromWeb(response.body as WebReadableStream<Uint8Array>),
  };
}

const ignore = () => undefined;

/**
 * Drops an answer's body unread. undici's bodies report being destroyed before their end as an
 * 'error', which has nobody else to hear it here.
 */
export function discard(body: Readable): void {
  body.on('error', ignore).destroy();
}

/** A header of an answer as one string: the first of a repeated one, '' when absent. */
export function answerHeader(answer: ProviderAnswer, name: string): string {
  const value = answer.headers[name];
  return (Array.isArray(value) ? value[0] : value) ?? '';
}

/** The call a request of `UpstreamCall.request()` is for: the built-in providers take its `abortSource` from it. */
export const UPSTREAM_CALL = Symbol('koa-model-gateway.upstream-call');

/** A `ProviderRequest` as `UpstreamCall.request()` makes it. */
export interface CallRequest extends ProviderRequest {
  readonly [UPSTREAM_CALL]: UpstreamCall;
}

// One getter for every request: its call's AbortSignal, which costs microseconds, made only when
// a provider reads it. Own and enumerable, as a plain property: a provider that spreads the
// request keeps it.
const signalOfCall: PropertyDescriptor = {
  get(this: CallRequest) {
    return this[UPSTREAM_CALL].signal;
  },
  enumerable: true,
  configurable: true,
};

/**
 * One request to an upstream: the signal that aborts it, an idle timer that aborts it when the
 * upstream stays silent for `timeoutMs` (before its headers, or between two reads of its body), a
 * deadline that aborts it when its answer is not whole (JSON), or its first event not with the
 * client (a stream), within `answerMs` however many bytes trickle in, why it ended early, and how
 * long it took. Failures become 502/504 errors whose `cause` says
 * what happened, for the server's log only: bodies never carry the provider's address, key or answer.
 * Given an `AttemptTrace`, it tells it the attempt's answer, chunks, failure and end.
 */
export class UpstreamCall {
  // Made when a provider reads the signal, or the built-in ones the emitter (`abortSource`).
  #controller: AbortController | undefined;
  #aborts: EventEmitter | undefined;
  #aborted = false;
  readonly #timeoutMs: number;
  /** The largest JSON answer, or one event of a stream, read from the upstream. */
  readonly maxBytes: number;
  readonly #provider: string;
  readonly #startedAt = performance.now();
  // One timer for the whole call, restarted by each sign of life (refresh(): no new timer per read).
  readonly #timer: NodeJS.Timeout;
  readonly #answerMs: number;
  readonly #deadline: NodeJS.Timeout;
  #overran = false;
  #paused = false;
  /** The answer being read: destroyed with the call, whether or not its provider heeds the signal. */
  #body: Readable | undefined;
  #timedOut = false;
  /** Signs of life so far: the idle timer's check tells one read after it fired. */
  #touches = 0;
  #delivered = false;
  #clientGone = false;
  #headersMs: number | null = null;
  #firstByteMs: number | null = null;
  #durationMs: number | null = null;
  readonly #trace: AttemptTrace | undefined;

  /** `answerMs` defaults to `timeoutMs`; `maxBytes` to 32 MiB. */
  constructor(
    provider: string,
    timeoutMs: number,
    trace?: AttemptTrace,
    { maxBytes = DEFAULT_MAX_UPSTREAM_BYTES, answerMs = timeoutMs }: { maxBytes?: number; answerMs?: number } = {},
  ) {
    this.#provider = provider;
    this.#timeoutMs = timeoutMs;
    this.#answerMs = answerMs;
    this.maxBytes = maxBytes;
    this.#trace = trace;
    // After a stall of this process, timers run before the sockets are read: both timers decide only
    // once what came meanwhile is read (setImmediate runs after that), so a stall is no silence.
    this.#timer = setTimeout(() => {
      const touches = this.#touches;
      setImmediate(() => {
        if (this.#paused || this.#touches !== touches || this.#durationMs !== null) return;
        this.#timedOut = true;
        this.#abort();
      });
    }, timeoutMs);
    this.#deadline = setTimeout(() => {
      setImmediate(() => {
        // Aborted already (silent, or the client gone): that is the reason. Whole or delivered meanwhile: in time.
        if (this.#aborted || this.#durationMs !== null || this.#delivered) return;
        this.#timedOut = true;
        this.#overran = true;
        this.#abort();
      });
    }, answerMs);
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort();
    }
    return this.#controller.signal;
  }

  /** What a provider is handed: `body`, `headers`, the trace headers, and `signal`, made when first read. */
  request(body: JsonObject, headers: Readonly<Record<string, string>>): CallRequest {
    const request: Omit<CallRequest, 'signal'> = { body, headers, traceHeaders: this.#trace?.headers, [UPSTREAM_CALL]: this };
    return Object.defineProperty(request, 'signal', signalOfCall) as CallRequest;
  }

  /**
   * For undici's `signal` option, which takes an EventEmitter as well as an AbortSignal (at a
   * tenth of its cost): an emitter told 'abort', or once aborted an aborted signal, which undici
   * checks before it sends.
   */
  get abortSource(): AbortSignal | EventEmitter {
    return this.#aborted ? this.signal : (this.#aborts ??= new EventEmitter());
  }

  /** True once the upstream stayed silent longer than `timeoutMs`, or its answer took longer than `answerMs`, and the call was aborted for it. */
  get timedOut(): boolean {
    return this.#timedOut;
  }

  /** True once the client went away and the upstream request was aborted for it. */
  get clientGone(): boolean {
    return this.#clientGone;
  }

  /** The upstream answered something: its silence is measured from now. */
  touch(): void {
    this.#paused = false;
    this.#touches++;
    this.#timer.refresh();
  }

  /** The upstream's headers arrived: its silence is measured from now. */
  answered(answer: ProviderAnswer): void {
    this.#headersMs ??= performance.now() - this.#startedAt;
    this.#trace?.answered(answer);
    this.touch();
  }

  /** The first event of a stream reached the client: from now on only silence ends the call, never its length. */
  delivered(): void {
    this.#delivered = true;
    clearTimeout(this.#deadline);
  }

  /** The upstream's part is over (its answer read, or the call failed): stops the timers and the clock, once. */
  end(): void {
    if (this.#durationMs !== null) return;
    this.#durationMs = performance.now() - this.#startedAt;
    clearTimeout(this.#timer);
    clearTimeout(this.#deadline);
    this.#trace?.end();
  }

  /**
   * Milliseconds from the call to the first byte of the upstream's answer body (its headers, for
   * an answer whose body was not read); null while nothing has arrived.
   */
  get firstByteMs(): number | null {
    return this.#firstByteMs ?? this.#headersMs;
  }

  /** Milliseconds from the call to the end of the upstream's answer, or to its failure; null until then. */
  get durationMs(): number | null {
    return this.#durationMs;
  }

  /** Stops the idle timer while the gateway waits on something other than the upstream, until the next `touch()`. */
  pause(): void {
    this.#paused = true;
  }

  abandon(): void {
    this.#clientGone = true;
    this.#trace?.failed('cancelled');
    this.#abort();
  }

  #abort(): void {
    this.#aborted = true;
    this.#controller?.abort();
    this.#aborts?.emit('abort');
    if (this.#body) discard(this.#body);
  }

  /** What the client is told about `thrown`: a refusal as it is, a timeout 504, anything else 502. */
  failure(thrown: unknown): GatewayError {
    this.#trace?.failed(this.#timedOut ? 'timeout' : errorType(thrown));
    if (thrown instanceof GatewayError) return thrown;
    const err = this.#timedOut ? errors.upstreamTimeout() : errors.upstreamError();
    if (!this.#timedOut) err.cause = thrown;
    else if (this.#overran) err.cause = `provider '${this.#provider}' did not complete its answer within ${this.#answerMs} ms`;
    else err.cause = `provider '${this.#provider}' was silent for ${this.#timeoutMs} ms`;
    return err;
  }

  /** A 502 for an answer that arrived but is unusable; `detail` goes to the log, not the client. */
  malformed(detail: string): GatewayError {
    this.#trace?.failed('malformed_answer');
    const err = errors.upstreamError();
    err.cause = `provider '${this.#provider}' ${detail}`;
    return err;
  }

  /**
   * Reads `body` to its end, chunk by chunk, each restarting the idle timer, and resolves then.
   * `onChunk` returns false when whoever it writes to is full: the body pauses, and the idle timer
   * with it (a slow client is no silence of the upstream), until `drained` emits 'drain'. Rejects
   * when the body fails or is destroyed first (the call aborted), or with what `onChunk` throws,
   * the body then destroyed.
   */
  read(body: Readable, onChunk: (chunk: Buffer | string) => boolean, drained?: EventEmitter): Promise<void> {
    this.#body = body;
    if (body.destroyed || this.#aborted) {
      discard(body);
      return Promise.reject(new Error('the upstream answer was closed before it was read'));
    }
    return new Promise((resolve, reject) => {
      const resume = () => {
        this.touch();
        body.resume();
      };
      body.on('data', (chunk: Buffer | string) => {
        this.#firstByteMs ??= performance.now() - this.#startedAt;
        this.#trace?.chunk(chunk);
        this.touch();
        let more: boolean;
        try {
          more = onChunk(chunk);
        } catch (err) {
          // What the chunk told ends the answer (an upstream's error event): nothing more is read.
          discard(body);
          reject(err);
          return;
        }
        if (more || drained === undefined) return;
        this.pause();
        body.pause();
        drained.once('drain', resume);
      });
      body.once('end', () => {
        this.end();
        resolve();
      });
      body.once('error', reject);
      // Destroyed without an error (a provider's own stream, on abort). Every body closes after its end too.
      body.once('close', () => {
        if (!body.readableEnded) reject(new Error('the upstream answer was closed before its end'));
      });
    });
  }

  /** The whole body, as text: at most `maxBytes`, refused past them (502) before more is kept. */
  async text(body: Readable): Promise<string> {
    const whole = new WholeBody(this.maxBytes);
    await this.read(body, (chunk) => {
      try {
        return whole.add(chunk);
      } catch (err) {
        (err as GatewayError).cause = `provider '${this.#provider}' sent an answer of more than ${this.maxBytes} bytes`;
        throw err;
      }
    });
    return whole.text();
  }

  /** A successful JSON answer, parsed; anything else than a JSON object is malformed. */
  async json(answer: ProviderAnswer): Promise<JsonObject> {
    const text = await this.text(answer.body);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw this.malformed(`answered HTTP ${answer.statusCode} with a body that is not JSON`);
    }
    if (!isObject(body)) throw this.malformed(`answered HTTP ${answer.statusCode} with JSON that is not an object`);
    return body;
  }

  /**
   * The error for a non-2xx answer. A refusal (400, 413, 422, 429) keeps its status and the
   * upstream's message and string code, read from either format's `error` object, and a 429 its
   * `retry-after`; any other status (including the upstream's 401 or 404, which are the gateway's
   * configuration, not the client's fault) is a 502.
   */
  async refusal(answer: ProviderAnswer): Promise<GatewayError> {
    const status = answer.statusCode;
    if (!REFUSALS.has(status)) {
      discard(answer.body);
      return this.malformed(`answered HTTP ${status}`);
    }
    const text = await this.text(answer.body);
    let detail: JsonObject = {};
    try {
      const body: unknown = JSON.parse(text);
      if (isObject(body) && isObject(body.error)) detail = body.error;
    } catch {
      // A refusal without a JSON body still passes its status, with a message of our own.
    }
    const message = typeof detail.message === 'string' && detail.message !== '' ? detail.message : 'The upstream provider refused the request';
    const err = errors.upstreamRefused(status, typeof detail.code === 'string' ? detail.code : undefined, message);
    const retryAfter = answerHeader(answer, 'retry-after');
    if (status === 429 && SECONDS.test(retryAfter)) err.headers['retry-after'] = retryAfter;
    return err;
  }
}

/** An answer's chunks, kept up to `maxBytes`: past them, `add()` throws the 502 naming the limit. */
class WholeBody {
  readonly #chunks: Buffer[] = [];
  #bytes = 0;
  readonly #maxBytes: number;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  add(chunk: Buffer | string): boolean {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.#bytes += buffer.length;
    if (this.#bytes > this.#maxBytes) throw errors.upstreamAnswerTooLarge(this.#maxBytes);
    this.#chunks.push(buffer);
    return true;
  }

  text(): string {
    return this.#chunks.length === 1 ? (this.#chunks[0] as Buffer).toString('utf8') : Buffer.concat(this.#chunks).toString('utf8');
  }
}

/**
 * All of `body` as text, for a reader of an upstream's answer other than its call's own (a
 * translation's): at most `maxBytes` (past them a 502 naming the limit, the body destroyed), each
 * chunk a sign of life for `call`'s silence limit. Rejects as the body fails or is destroyed before its end.
 */
export function readWhole(body: Readable, maxBytes: number, call: UpstreamCall | undefined): Promise<string> {
  const whole = new WholeBody(maxBytes);
  return new Promise((resolve, reject) => {
    body.on('data', (chunk: Buffer | string) => {
      call?.touch();
      try {
        whole.add(chunk);
      } catch (err) {
        discard(body);
        reject(err);
      }
    });
    body.once('end', () => resolve(whole.text()));
    body.once('error', reject);
    body.once('close', () => {
      if (!body.readableEnded) reject(new Error('the upstream answer was closed before its end'));
    });
  });
}

/** A failure's class for a trace: a refusal's status, an error's code (ECONNREFUSED, UND_ERR_SOCKET), else its name. */
function errorType(thrown: unknown): string {
  if (thrown instanceof GatewayError) return String(thrown.status);
  const { code, name } = (thrown ?? {}) as { code?: unknown; name?: unknown };
  if (typeof code === 'string') return code;
  return typeof name === 'string' ? name : '_OTHER';
}
