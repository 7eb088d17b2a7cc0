import type { Context } from 'koa';
import { z } from 'zod';
import { errors, StoreUnavailableError } from '../../errors/gateway-error.js';
import { EventSplitter } from '../../http/server-sent-events.js';
import type { JsonObject } from '../content.js';
import type { EndpointFormat } from '../endpoint-format.js';
import type { Request } from '../formats/neutral.js';
import { parseOptions, positiveInteger, timerMs } from '../../settings/schemas.js';
import type { ModelRequestState, VerifiedKey } from '../../state.js';
import { cacheKey, cacheVariant } from './cache-key.js';
import {
  AnswerCollector,
  freshId,
  isCachedEndpoint,
  entryText,
  KEEPS_WRITTEN,
  neutralRequest,
  readEntry,
  replayEvents,
  replayJson,
  type CachedAnswer,
  type CachedEndpoint,
} from './cached-answer.js';
import { cacheDirectives } from './cache-control.js';
import type { ResponseCache } from './response-cache.js';

/** Options of the model endpoints' `cache`. */
export interface ResponseCachingOptions {
  /** Where entries live: `MemoryResponseCache` for one process, `RedisResponseCache` shared by every instance. */
  store: ResponseCache;
  /** How long a lookup may take before the call goes on as a miss, in ms: half the Redis stores' own bound. Default 250. */
  lookupTimeoutMs?: number;
  /** How long identical calls wait for the first one's answer before each goes upstream, in ms. Default 30,000. */
  waitMs?: number;
  /** The longest time to live a request's `Cache-Control: max-age` may ask for, in seconds. Default 86,400 (a day). */
  maxTtlSeconds?: number;
  /** The clock of the entries' `age`, in ms since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
}

const cachingOptions = z.object({
  lookupTimeoutMs: timerMs.default(250),
  waitMs: timerMs.default(30_000),
  maxTtlSeconds: positiveInteger.default(86_400),
});

/** How a call met the cache: `kmg_cache_requests_total{outcome}`, `x-kmg-cache` (an `error` says `miss`). */
export type CacheOutcome = 'hit' | 'miss' | 'bypass' | 'error';

/** What the model endpoint tells the cache of a call. */
export interface CachedCall {
  key: VerifiedKey;
  format: EndpointFormat;
  /** The catalog model the call resolved to, and its own `cache` setting. */
  model: string;
  modelTtlSeconds: number | undefined;
  body: JsonObject;
  /** The client's headers the upstream is sent: part of the key. */
  headers: Readonly<Record<string, string>>;
  state: ModelRequestState;
}

/**
 * The exact response cache of the model endpoints: made once per endpoint from its `cache` option
 * (`modelsRouter()` makes one for all). Off for a call unless its model (`cache.ttlSeconds` in the
 * catalog), its key (`cache.ttlSeconds`) or the call (`Cache-Control: max-age=N`) asks for it.
 * Identical calls in flight on this process wait for the first (single flight, `waitMs`); a store
 * that fails or is slower than `lookupTimeoutMs` is a miss, reported on `app.on('error')`.
 */
export class ResponseCaching {
  readonly #store: ResponseCache;
  readonly #lookupTimeoutMs: number;
  readonly #waitMs: number;
  readonly #maxTtlSeconds: number;
  readonly #nowMs: () => number;
  /** The answer each call in flight will give, by key: the calls after it wait for it. */
  readonly #inFlight = new Map<string, Promise<CachedAnswer | undefined>>();

  constructor(options: ResponseCachingOptions, where: string) {
    if (typeof options?.store?.get !== 'function' || typeof options.store.set !== 'function') {
      throw new TypeError(`koa-model-gateway: ${where}: cache.store must be a ResponseCache (MemoryResponseCache, RedisResponseCache)`);
    }
    const { lookupTimeoutMs, waitMs, maxTtlSeconds } = parseOptions(cachingOptions, options, `${where}: cache`);
    this.#store = options.store;
    this.#lookupTimeoutMs = lookupTimeoutMs;
    this.#waitMs = waitMs;
    this.#maxTtlSeconds = maxTtlSeconds;
    this.#nowMs = options.nowMs ?? Date.now;
  }

  /**
   * Looks the call up, and tells it on `x-kmg-cache` and `state.cache`: a `CacheTicket` whose
   * `hit` is the entry to answer with, or, on a miss, what to tell of the answer so it can be stored.
   */
  async lookup(ctx: Context, call: CachedCall): Promise<CacheTicket> {
    const ticket = this.#ticket(ctx, call);
    if (ticket.canRead) await ticket.read();
    // A hit says so once it is answered: a 429 refusing it is no hit.
    if (ticket.hit) return ticket;
    ticket.collect();
    call.state.cache = ticket.outcome;
    ctx.res.setHeader('x-kmg-cache', ticket.outcome === 'error' ? 'miss' : ticket.outcome);
    return ticket;
  }

  #ticket(ctx: Context, { key, format, model, modelTtlSeconds, body, headers, state }: CachedCall): CacheTicket {
    const { endpoint } = format;
    const directives = cacheDirectives(ctx.get('cache-control'));
    const maxAge = directives.maxAge === undefined ? undefined : Math.min(directives.maxAge, this.#maxTtlSeconds);
    const ttlSeconds = maxAge ?? key.cache?.ttlSeconds ?? modelTtlSeconds;
    if (!isCachedEndpoint(endpoint) || ttlSeconds === undefined || ttlSeconds <= 0 || (directives.noCache && directives.noStore)) {
      return new CacheTicket(this, 'bypass');
    }
    const request = neutralRequest(endpoint, body);
    if (request === undefined) return new CacheTicket(this, 'bypass');
    const name = cacheKey({ account: key.account, keyId: key.cache?.perKey ? key.id : undefined, endpoint, model, body, headers });
    return new CacheTicket(this, directives.noCache ? 'bypass' : 'miss', {
      ctx,
      account: key.account,
      name,
      endpoint,
      request,
      variant: cacheVariant(body),
      ttlSeconds,
      maxAgeMs: maxAge === undefined ? undefined : maxAge * 1000,
      canRead: !directives.noCache,
      canWrite: !directives.noStore,
      format,
      model,
      body,
      state,
    });
  }

  /** @internal The entry under `name`, or undefined after `lookupTimeoutMs` or a failure (reported). */
  async get(ctx: Context, account: string, name: string): Promise<{ entry: CachedAnswer | undefined; failed: boolean }> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      // After a stall of this process, timers run before the sockets are read: an answer that came
      // meanwhile is read in this same turn of the loop, before setImmediate's callbacks.
      timer = setTimeout(
        () => setImmediate(() => reject(new StoreUnavailableError(`the response cache did not answer within ${this.#lookupTimeoutMs} ms`, { store: 'cache' }))),
        this.#lookupTimeoutMs,
      );
    });
    try {
      const text = await Promise.race([this.#store.get(account, name), late]);
      return { entry: text === undefined ? undefined : readEntry(text), failed: false };
    } catch (err) {
      reportOutage(ctx, err);
      return { entry: undefined, failed: true };
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * @internal Stores an entry, not awaited by the call: a failure is reported. One the store
   * declines (too large) is offered again without its written answer, which a hit can do without.
   */
  put(ctx: Context, account: string, name: string, entry: CachedAnswer, ttlSeconds: number): Promise<unknown> {
    const { written, ...parts } = entry;
    return this.#store
      .set(account, name, entryText(entry), ttlSeconds)
      .then((kept) => kept || written === undefined || this.#store.set(account, name, entryText(parts), ttlSeconds))
      .catch((err: unknown) => reportOutage(ctx, err));
  }

  /** @internal The first call's answer, when one is in flight under `name`, waited for at most `waitMs`; else undefined, and this call is now the first. */
  async join(name: string, settled: Promise<CachedAnswer | undefined>, over: Promise<unknown>): Promise<CachedAnswer | undefined> {
    const first = this.#inFlight.get(name);
    if (first === undefined) {
      this.#inFlight.set(name, settled);
      // Kept until the answer is in the store, and the lookups that missed it meanwhile have come
      // back (a turn of the loop later): they find it here rather than going upstream again.
      void over.then(() =>
        setImmediate(() => {
          if (this.#inFlight.get(name) === settled) this.#inFlight.delete(name);
        }),
      );
      return undefined;
    }
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), this.#waitMs);
    });
    try {
      return await Promise.race([first, waited]);
    } finally {
      clearTimeout(timer);
    }
  }

  nowMs(): number {
    return this.#nowMs();
  }
}

/**
 * A store's failure, reported as the outage it is (a 503 with the failure as its cause, which
 * carries no stack): a gateway logs a store that stays away once, then a count, as it does for
 * its other stores. The call itself goes on.
 */
function reportOutage(ctx: Context, err: unknown): void {
  const outage = errors.serviceUnavailable();
  outage.cause = err;
  ctx.app.emit('error', outage, ctx);
}

interface TicketCall {
  ctx: Context;
  account: string;
  name: string;
  endpoint: CachedEndpoint;
  /** The body in the neutral representation. */
  request: Request;
  /** `cacheVariant()` of the call's body: a hit of the same variant is sent the written answer. */
  variant: string;
  ttlSeconds: number;
  /** The oldest entry the call accepts (its `max-age`), in ms. */
  maxAgeMs: number | undefined;
  canRead: boolean;
  canWrite: boolean;
  format: EndpointFormat;
  model: string;
  body: JsonObject;
  state: ModelRequestState;
}

/** One call's dealings with the cache. */
export class CacheTicket {
  readonly #caching: ResponseCaching;
  readonly #call: TicketCall | undefined;
  outcome: CacheOutcome;
  /** The entry the call is answered with: set on a hit. */
  hit: CachedAnswer | undefined;
  /** What the call's answer is told to, to be stored: set on a miss that may be stored. */
  collector: AnswerCollector | undefined;
  #settle: ((entry: CachedAnswer | undefined) => void) | undefined;
  /** Told when this call's part is over: its answer written to the store, or none to write. */
  #over: ((written: Promise<unknown>) => void) | undefined;

  constructor(caching: ResponseCaching, outcome: CacheOutcome, call?: TicketCall) {
    this.#caching = caching;
    this.outcome = outcome;
    this.#call = call;
  }

  get canRead(): boolean {
    return this.#call?.canRead === true;
  }

  /** The store, then the identical call in flight. */
  async read(): Promise<void> {
    const call = this.#call;
    if (call === undefined) return;
    const { entry, failed } = await this.#caching.get(call.ctx, call.account, call.name);
    const now = this.#caching.nowMs();
    const fresh = (found: CachedAnswer | undefined) =>
      found !== undefined && (call.maxAgeMs === undefined || now - found.storedAt <= call.maxAgeMs) ? found : undefined;
    this.hit = fresh(entry);
    if (this.hit === undefined) {
      const settled = new Promise<CachedAnswer | undefined>((resolve) => {
        this.#settle = resolve;
      });
      const over = new Promise<unknown>((resolve) => {
        this.#over = resolve;
      });
      this.hit = fresh(await this.#caching.join(call.name, settled, over));
      // A call that waited for another's answer is not the first: nobody waits for it.
      if (this.hit !== undefined) this.#done(undefined);
      // Whatever becomes of a call that goes upstream, those waiting for it go on once its answer is over.
      else call.ctx.res.once('close', () => this.end());
    }
    this.outcome = this.hit ? 'hit' : failed ? 'error' : 'miss';
  }

  /**
   * Answers the call with its hit: JSON or a stream in its own format, with a fresh id, costing
   * nothing. A call that asks what the one that stored it asked is sent the answer that one was
   * written, its id replaced; any other has it written again from the parts.
   */
  replay(): void {
    const call = this.#call;
    const { hit } = this;
    if (call === undefined || hit === undefined) return;
    const { ctx, endpoint, state, variant } = call;
    state.cache = 'hit';
    state.costSavedPicoUsd = hit.costPicoUsd;
    ctx.res.setHeader('x-kmg-cache', 'hit');
    ctx.res.setHeader('age', String(Math.max(0, Math.floor((this.#caching.nowMs() - hit.storedAt) / 1000))));
    const id = freshId(endpoint);
    const text = hit.written?.variant === variant ? hit.written.pieces.join(id) : answerText(call, hit, id);
    if (!state.stream) {
      ctx.res.setHeader('content-type', 'application/json; charset=utf-8');
      ctx.body = text;
      return;
    }
    ctx.status = 200;
    ctx.set({ 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
    ctx.body = text;
  }

  /** Readies a miss whose answer may be stored to collect it; a hit stores nothing, and collects nothing. */
  collect(): void {
    if (this.#call?.canWrite) this.collector = new AnswerCollector(this.#call.endpoint);
  }

  /** Stores the call's answer, when it was seen whole, and gives it to the calls waiting for it. */
  store(): void {
    const call = this.#call;
    const entry = call && this.collector?.entry(call.state, call.state.costPicoUsd, this.#caching.nowMs());
    if (call && entry && KEEPS_WRITTEN[call.endpoint]) {
      const placeholder = freshId(call.endpoint);
      const pieces = answerText(call, entry, placeholder).split(placeholder);
      // A writer that did not write the id as it is would give every hit the same one: nothing kept.
      if (pieces.length > 1) entry.written = { variant: call.variant, pieces };
    }
    const stored = call && entry ? this.#caching.put(call.ctx, call.account, call.name, entry, call.ttlSeconds) : undefined;
    this.#done(entry, stored);
  }

  /** The call is over: the calls waiting for it go on (upstream each, when it stored nothing). */
  end(): void {
    this.#done(undefined);
  }

  #done(entry: CachedAnswer | undefined, written: Promise<unknown> = Promise.resolve()): void {
    this.#settle?.(entry);
    this.#settle = undefined;
    this.#over?.(written);
    this.#over = undefined;
  }
}

/**
 * An entry as `call`'s client is sent it, with `id` as the answer's: JSON, or the stream's events
 * through the format's reader, as a relayed stream is (what the client did not ask for, a usage chunk, is withheld).
 */
function answerText(call: TicketCall, entry: CachedAnswer, id: string): string {
  const { endpoint, format, model, state, body, request } = call;
  if (!state.stream) return JSON.stringify(replayJson(endpoint, entry, request, model, id));
  const reader = format.answer.stream(body, model);
  const splitter = new EventSplitter();
  let out = '';
  for (const event of [...splitter.push(replayEvents(endpoint, entry, request, model, id)), ...splitter.end()]) out += reader.event(event);
  return out;
}
