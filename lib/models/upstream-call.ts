import { performance } from 'node:perf_hooks';
import { GatewayError, errors } from '../errors/gateway-error.js';
import { isObject, type JsonObject } from './content.js';

// The refusals whose status and message reach the client (decisions.md); any other status is 502.
const REFUSALS = new Set([400, 413, 422, 429]);

/**
 * One request to an upstream: the signal that aborts it, an idle timer that aborts it when the
 * upstream stays silent for `timeoutMs` (before its headers, or between two reads of its body),
 * why it ended early, and how long it took. Failures become 502/504 errors whose `cause` says
 * what happened, for the server's log only: bodies never carry the provider's address, key or answer.
 */
export class UpstreamCall {
  readonly #controller = new AbortController();
  readonly #timeoutMs: number;
  readonly #provider: string;
  readonly #startedAt = performance.now();
  #timer: NodeJS.Timeout | undefined;
  #timedOut = false;
  #clientGone = false;
  #headersMs: number | null = null;
  #firstByteMs: number | null = null;
  #durationMs: number | null = null;

  constructor(provider: string, timeoutMs: number) {
    this.#provider = provider;
    this.#timeoutMs = timeoutMs;
    this.touch();
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** True once the client went away and the upstream request was aborted for it. */
  get clientGone(): boolean {
    return this.#clientGone;
  }

  /** The upstream answered something: its silence is measured from now. */
  touch(): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timedOut = true;
      this.#controller.abort();
    }, this.#timeoutMs);
  }

  /** The upstream's headers arrived: its silence is measured from now. */
  answered(): void {
    this.#headersMs ??= performance.now() - this.#startedAt;
    this.touch();
  }

  /** The upstream's part is over (its answer read, or the call failed): stops the timer and the clock, once. */
  end(): void {
    this.#durationMs ??= performance.now() - this.#startedAt;
    this.pause();
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

  /** Stops the idle timer, while the gateway waits on something other than the upstream, or for good. */
  pause(): void {
    clearTimeout(this.#timer);
  }

  abandon(): void {
    this.#clientGone = true;
    this.#controller.abort();
  }

  /** What the client is told about `thrown`: a refusal as it is, a timeout 504, anything else 502. */
  failure(thrown: unknown): GatewayError {
    if (thrown instanceof GatewayError) return thrown;
    const err = this.#timedOut ? errors.upstreamTimeout() : errors.upstreamError();
    err.cause = this.#timedOut ? `provider '${this.#provider}' was silent for ${this.#timeoutMs} ms` : thrown;
    return err;
  }

  /** A 502 for an answer that arrived but is unusable; `detail` goes to the log, not the client. */
  malformed(detail: string): GatewayError {
    const err = errors.upstreamError();
    err.cause = `provider '${this.#provider}' ${detail}`;
    return err;
  }

  /** The upstream's body, chunk by chunk, each read restarting the idle timer; cancelled if left early. */
  async *chunks(response: Response): AsyncGenerator<Uint8Array> {
    if (response.body === null) return;
    const reader = response.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return this.end();
        this.#firstByteMs ??= performance.now() - this.#startedAt;
        this.touch();
        yield value;
      }
    } finally {
      await reader.cancel().catch(() => undefined);
    }
  }

  async text(response: Response): Promise<string> {
    const chunks: Uint8Array[] = [];
    for await (const chunk of this.chunks(response)) chunks.push(chunk);
    return Buffer.concat(chunks).toString('utf8');
  }

  /** A successful JSON answer, parsed; anything else than a JSON object is malformed. */
  async json(response: Response): Promise<JsonObject> {
    const text = await this.text(response);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw this.malformed(`answered HTTP ${response.status} with a body that is not JSON`);
    }
    if (!isObject(body)) throw this.malformed(`answered HTTP ${response.status} with JSON that is not an object`);
    return body;
  }

  /**
   * The error for a non-2xx answer. A refusal (400, 413, 422, 429) keeps its status and the
   * upstream's message and string code, read from either format's `error` object, and a 429 its
   * `retry-after`; any other status (including the upstream's 401 or 404, which are the gateway's
   * configuration, not the client's fault) is a 502.
   */
  async refusal(response: Response): Promise<GatewayError> {
    if (!REFUSALS.has(response.status)) {
      await response.body?.cancel().catch(() => undefined);
      return this.malformed(`answered HTTP ${response.status}`);
    }
    const text = await this.text(response);
    let detail: JsonObject = {};
    try {
      const body: unknown = JSON.parse(text);
      if (isObject(body) && isObject(body.error)) detail = body.error;
    } catch {
      // A refusal without a JSON body still passes its status, with a message of our own.
    }
    const message = typeof detail.message === 'string' && detail.message !== '' ? detail.message : 'The upstream provider refused the request';
    const err = errors.upstreamRefused(response.status, typeof detail.code === 'string' ? detail.code : undefined, message);
    const retryAfter = response.headers.get('retry-after');
    if (response.status === 429 && retryAfter !== null && /^\d+$/.test(retryAfter)) err.headers['retry-after'] = retryAfter;
    return err;
  }
}
