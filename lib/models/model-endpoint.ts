import type { Context } from 'koa';
import { z } from 'zod';
import { verifiedKey } from '../auth/api-key.js';
import { modelAccess } from '../auth/model-access.js';
import { spendBudgets, type SpendBudgets } from '../cost/budgets.js';
import { callCost, maxCallCost, type TokenPrice } from '../cost/price.js';
import { errors, type GatewayError } from '../errors/gateway-error.js';
import { dialectOf } from '../errors/request-dialect.js';
import { usdOfPico } from '../picodollars.js';
import type { BlobStore } from '../files/blob-store.js';
import { isFileId } from '../files/file-id.js';
import type { FileStore } from '../files/file-store.js';
import { readJsonBody } from '../http/json-body.js';
import { MemoryModelLimiter } from '../stores/memory/model-limiter.js';
import { MemorySpendLedger } from '../stores/memory/spend-ledger.js';
import type { ModelLimiter } from '../quota/model-limiter.js';
import { modelLimitsSchema, type ModelLimitDecision, type ModelLimits } from '../quota/model-limits.js';
import { modelLimitRefusal, rateLimitHeaders } from '../quota/rate-limit-headers.js';
import { parseOptions, positiveInteger, timerMs } from '../settings/schemas.js';
import type { ModelRequestState } from '../state.js';
import { ResponseCaching, type ResponseCachingOptions } from './cache/response-caching.js';
import type { TokenUsage } from '../usage/token-usage.js';
import { findAttachments, readAttachments, type FileStores } from './attachments.js';
import { endpointCatalogOptions, type CatalogModel } from './catalog.js';
import { OMITTED_HEADER } from './formats/translate.js';
import type { EndpointFormat } from './endpoint-format.js';
import type { Provider, ProviderRequest } from './provider.js';
import { FORMATS } from './formats/registry.js';
import { forward, type Forwarding } from './relay.js';
import { AttemptFailedError } from './routing/attempt-failed.js';
import { modelRoutes, type Leg, type ModelRoute } from './routing/deployments.js';
import { classify, learn, type Failure } from './routing/failures.js';
import { candidates, nextLeg, plan, type Planner } from './routing/plan.js';
import { backoffMs, routingOptions, type RoutingOptions } from './routing/routing-options.js';
import { DEFAULT_MAX_UPSTREAM_BYTES, UpstreamCall } from './upstream-call.js';

/** Options of `chatCompletions()`, `responses()`, `messages()`, `countTokens()` and `embeddings()`. */
export interface ModelEndpointOptions {
  /** The models clients may ask for. */
  catalog: readonly CatalogModel[];
  /**
   * The providers the models refer to by id: the built-in `openAIProvider()`, `anthropicProvider()`,
   * `echoProvider()`, or any object of the `Provider` interface.
   */
  providers: readonly Provider[];
  /** Where attached files are looked up. Without `files` and `blobs`, every file reference is 404. */
  files?: FileStore;
  blobs?: BlobStore;
  /** How long the upstream may stay silent, before its headers or between two reads of its body. Default 300,000 ms. */
  timeoutMs?: number;
  /** Largest request body, in bytes. Default 10 MiB (10,485,760). */
  bodyLimit?: number;
  /**
   * Largest JSON answer, and largest event of a streamed answer, read from an upstream, in bytes:
   * one over it is a 502 naming the limit (retried as a failed attempt), read no further. Default
   * 32 MiB (33,554,432).
   */
  maxUpstreamBytes?: number;
  /** Largest total of the files attached to one request, in bytes. Default 32 MiB (33,554,432), both providers' request limit. */
  maxAttachedBytes?: number;
  /** The clock for file expiry, the default model limiter's and spend ledger's windows (and, in `modelsRouter()`, the time of usage records), in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
  /**
   * Counts every key's model calls against its limits: `MemoryModelLimiter` for one process,
   * `RedisModelLimiter` for several. Default: a `MemoryModelLimiter` of the handler's own
   * (`modelsRouter()` makes one for all its endpoints, so that a key's limits count every call).
   */
  modelLimiter?: ModelLimiter;
  /**
   * The limits of every key, `{ requestsPerMinute?, tokensPerMinute?, tokensPerDay? }` (positive
   * integers), which a key's own `limits` override field by field. Default: none (unlimited).
   */
  modelLimits?: ModelLimits;
  /**
   * Budgets in money, checked before a call is forwarded and charged when it ends: a key's
   * (`costPerDay`, `costPerMonth` of its limits over `modelLimits`) and its account's:
   * `spendBudgets({ ledger, accounts })`. Default: keys' budgets on a `MemorySpendLedger` of the
   * handler's own (`modelsRouter()` makes one for all its endpoints).
   */
  budgets?: SpendBudgets;
  /**
   * How calls are spread over a model's deployments, retried and sent to its fallbacks, and how
   * failing deployments cool down: see `RoutingOptions` for every field and its default (3
   * attempts, no time budget, retried statuses 408, 429, 500, 502, 503, 504, 529, a cooldown of
   * 30 s after 3 failures in 10 s, in a `MemoryCooldownStore` of the handler's own).
   */
  routing?: RoutingOptions;
  /**
   * The exact response cache: `{ store, lookupTimeoutMs?, waitMs?, maxTtlSeconds? }` (see
   * `ResponseCachingOptions`). A call is cached only when its model, its key or the call itself
   * asks for it. Default: none (every call goes upstream).
   */
  cache?: ResponseCachingOptions;
}

const endpointLimits = z.object({
  timeoutMs: timerMs.default(300_000),
  bodyLimit: positiveInteger.default(10 * 1024 * 1024),
  maxUpstreamBytes: positiveInteger.default(DEFAULT_MAX_UPSTREAM_BYTES),
  maxAttachedBytes: positiveInteger.default(32 * 1024 * 1024),
  modelLimits: modelLimitsSchema.default({}),
  modelLimiter: z
    .custom<ModelLimiter>(
      (value) => typeof (value as Partial<ModelLimiter>)?.consume === 'function' && typeof (value as Partial<ModelLimiter>).addTokens === 'function',
      {
        error: 'must be a ModelLimiter (MemoryModelLimiter, RedisModelLimiter)',
      },
    )
    .optional(),
});

/**
 * The request handling every model endpoint shares, as a function of `ctx`: parse, resolve the
 * model through the one allowlist policy, resolve attached files, apply the key's limits, forward,
 * answer naming the catalog id, count the answer's tokens. Check order as decisions.md fixes it:
 * permission (403), validation (400/413), existence (404), limits (429); a refused call sends
 * nothing upstream.
 */
export function modelEndpoint(format: EndpointFormat, options: ModelEndpointOptions): (ctx: Context) => Promise<void> {
  const where = `${format.endpoint}()`;
  const { catalog, providers } = endpointCatalogOptions(options, where);
  const { timeoutMs, bodyLimit, maxUpstreamBytes, maxAttachedBytes, modelLimits, modelLimiter } = parseOptions(endpointLimits, options, where);
  if ((options.files === undefined) !== (options.blobs === undefined)) {
    throw new TypeError(`koa-model-gateway: ${where}: files and blobs go together: give both or neither`);
  }
  const stores: FileStores | undefined = options.files && options.blobs && { files: options.files, blobs: options.blobs };
  const nowMs = options.nowMs ?? Date.now;
  const limiter = modelLimiter ?? new MemoryModelLimiter({ nowMs });
  if (options.budgets !== undefined && typeof options.budgets.check !== 'function') {
    throw new TypeError(`koa-model-gateway: ${where}: budgets must come from spendBudgets()`);
  }
  const budgets = options.budgets ?? spendBudgets({ ledger: new MemorySpendLedger({ nowMs }) });
  const routing = routingOptions(options.routing, where);
  const routes = modelRoutes(catalog, providers, format.endpoint);
  const planner: Planner = { routes, routing, nowMs };
  const catalogIds = new Set(routes.keys());
  const servedType = format.endpoint === 'embeddings' ? 'embeddings' : 'chat';
  const caching = options.cache && new ResponseCaching(options.cache, where);

  return async (ctx) => {
    const key = verifiedKey(ctx);
    const body = await readJsonBody(ctx.req, bodyLimit);
    const requested = body.model;
    if (typeof requested !== 'string' || requested === '') throw errors.invalidRequest("'model' must be a non-empty string");
    const access = modelAccess(key, catalogIds, requested);
    if (access === 'not_allowed' && format.modelNotAllowed) throw format.modelNotAllowed(requested);

    const fileIds: unknown[] = [];
    format.fileReferences.map(body, (fileId, block) => {
      fileIds.push(fileId);
      return block;
    });
    // A key must not read through a model what it could not read directly.
    if (fileIds.length > 0 && !key.scopes.includes('files:read')) throw errors.forbidden();
    const checkedIds = fileIds.map((id) => {
      if (typeof id !== 'string' || !isFileId(id)) throw errors.invalidFileId();
      return id;
    });

    format.checkBody(body);

    const route = access === 'allowed' ? routes.get(requested) : undefined;
    if (route === undefined) throw format.modelNotFound(requested);
    if (route.model.type !== servedType) throw wrongModelType(requested, route.model.type);
    const first = route.legs[0];
    if (first === undefined) throw format.unsupported(requested);
    const headers = forwardedHeaders(ctx, format.forwardHeaders);
    const stream = body.stream === true;
    const state: ModelRequestState = {
      model: requested,
      provider: first.provider.id,
      upstreamModel: first.upstreamModel,
      stream,
      attachments: checkedIds.length,
      inputTokens: 0,
      outputTokens: 0,
      upstreamFirstByteMs: null,
      upstreamMs: null,
      costPicoUsd: 0,
      attempts: [],
      cooldowns: [],
      ...(first.translation && { translatedTo: first.translation.target }),
    };
    ctx.state.modelRequest = state;
    // What cannot be carried over is refused here, a validation error like any other, recorded
    // with the model it was refused for.
    for (const leg of route.legs) leg.translation?.check(body, headers);
    const files = checkedIds.length === 0 ? [] : await findAttachments(stores, key.account, checkedIds, Math.floor(nowMs() / 1000), maxAttachedBytes);

    const limits: ModelLimits = { ...modelLimits, ...key.limits };
    // Once per client call, however many attempts it takes, a cached answer included.
    const admit = async (counted?: ModelLimitDecision) => {
      const decision = counted ?? (await limiter.consume(key.id, limits));
      if (!decision.allowed) {
        if (decision.refusedBy) state.limitedBy = decision.refusedBy;
        throw modelLimitRefusal(decision, dialectOf(ctx));
      }
      // Node's setHeader, not Koa's `set`: that allocates four arrays a header, on every call.
      if (decision.requests || decision.tokens) {
        const limitHeaders = rateLimitHeaders(decision, dialectOf(ctx));
        for (const name in limitHeaders) ctx.res.setHeader(name, limitHeaders[name] as string);
      }
    };
    // After the request limits' checks, before the budgets': a hit costs nothing, but counts as a request.
    const cached = await caching?.lookup(ctx, { key, format, model: requested, modelTtlSeconds: route.model.cache?.ttlSeconds, body, headers, state });
    if (cached?.hit) {
      await admit();
      cached.replay();
      return;
    }
    // Before the rate limits: a call the budget refuses counts no request.
    // A count of tokens generates nothing and costs nothing: it reserves nothing either.
    const maxCost =
      format.endpoint === 'countTokens'
        ? 0
        : maxCallCost(
            dearest(route),
            body,
            requestBytes(ctx, body) + files.reduce((sum, file) => sum + file.bytes, 0),
            longestAnswer(route, budgets.defaultMaxOutputTokens),
          );
    // Read beside the admission: on Redis, the cooldowns in the same round trip as the limits.
    const reachable = route.alone === undefined ? candidates(route, body, headers, planner) : undefined;
    // Nothing a call to an unpriced model spends would count against the budget.
    const unpriced = budgets.refuseUnpriced && route.legs.some((leg) => leg.route.model.price === undefined);
    // The request counted with the reservation, once it holds (one round trip on Redis); not when the budget may refuse the model after.
    const budget = await budgets.check(key, limits, maxCost, unpriced ? undefined : { limiter, keyId: key.id, limits });
    if (budget.refusal) {
      state.limitedBy = 'budget';
      throw budget.refusal;
    }
    if (unpriced && budget.parties.length > 0) {
      await budgets.charge(budget.parties, 0, budget.reservation);
      throw errors.modelUnpriced();
    }
    if (budget.remainingPicoUsd !== undefined) ctx.res.setHeader('x-kmg-budget-remaining-usd', String(usdOfPico(budget.remainingPicoUsd)));
    // From here the call holds a reservation: however it ends, its cost replaces it.
    try {
      await admit(budget.decision);

      // The bytes only now: a refused call reads none.
      const attached = files.length === 0 ? undefined : await readAttachments(stores, files);
      const withFiles = attached
        ? format.fileReferences.map(body, (fileId, block) => {
            const file = attached.get(fileId as string);
            return file ? format.fileReferences.inline(block, file) : block;
          })
        : body;

      /**
       * One attempt on one deployment: undefined when it answered (or the client left), else its
       * error and whether another attempt may follow. Its figures land on `state`: the last
       * attempt's are the call's. The upstream may stay silent `silenceMs`, and must have given its
       * whole JSON answer, or a stream's first event, within `answerMs`.
       */
      const attempt = async (leg: Leg, number: number, silenceMs: number, answerMs: number): Promise<Failure | undefined> => {
        const { translation: translated, send } = leg;
        state.provider = leg.provider.id;
        state.upstreamModel = leg.upstreamModel;
        if (translated === undefined) delete state.translatedTo;
        else state.translatedTo = translated.target;
        ctx.res.setHeader('x-kmg-attempts', String(number));
        ctx.res.setHeader('x-kmg-deployment', leg.provider.id);
        ctx.res.removeHeader(OMITTED_HEADER);
        delete state.omitted;
        const inlined = { ...withFiles, model: leg.upstreamModel };
        const upstreamBody = stream && format.answer.streamRequest ? format.answer.streamRequest(inlined) : inlined;
        const trace = ctx.state.tracing?.attempt({ endpoint: format.endpoint, provider: leg.provider, model: requested, body: upstreamBody, stream });
        const call = new UpstreamCall(leg.provider.id, silenceMs, trace, { maxBytes: maxUpstreamBytes, answerMs });
        let usage: TokenUsage = { inputTokens: 0, outputTokens: 0 };
        // What a translated stream told in the provider's format, which the client's may tell only at its end.
        let translatedUsage: TokenUsage | undefined;
        const sendCall = translated
          ? async (request: ProviderRequest) => {
              const answer = await translated.send(request);
              translatedUsage = answer.usage;
              if (answer.omitted.length > 0) {
                ctx.res.setHeader(OMITTED_HEADER, answer.omitted.join(','));
                state.omitted = [...answer.omitted];
              }
              return answer;
            }
          : send;
        // When the upstream's answer has ended: before the client's answer does, so that whatever
        // observes the end of the response finds the figures.
        const ended = (answered: TokenUsage) => {
          usage = translatedUsage
            ? {
                ...translatedUsage,
                ...answered,
                // The provider's count when it told one: the client's format may hold an estimate (a stream cut short).
                inputTokens: translatedUsage.inputTokens > 0 ? translatedUsage.inputTokens : answered.inputTokens,
                outputTokens: Math.max(answered.outputTokens, translatedUsage.outputTokens),
              }
            : answered;
          call.end();
          Object.assign(state, usage);
          state.upstreamFirstByteMs = call.firstByteMs;
          state.upstreamMs = call.durationMs;
          state.costPicoUsd = callCost(leg.route.price, usage);
        };
        // Set once the relay tells the answer's usage: an answer given whole, or a stream cut after its first event.
        let answered = false;
        const told = (usage: TokenUsage) => {
          answered = true;
          ended(usage);
        };
        // A neutral provider's errors carry an API error in their body: no path is ever named for them.
        const target = translated?.target ?? format.endpoint;
        const path = target === 'neutral' ? '' : FORMATS[target].path;
        const forwarding: Forwarding = {
          format,
          call,
          stream,
          request: body,
          model: requested,
          provider: leg.provider.id,
          path,
          ended: told,
          delivered: false,
        };
        if (cached?.collector) forwarding.tap = cached.collector;
        try {
          await forward(ctx, forwarding, () => sendCall(call.request(upstreamBody, headers)));
          state.attempts.push({ provider: leg.provider.id, model: leg.route.model.id, upstreamModel: leg.upstreamModel, outcome: 'ok' });
          return undefined;
        } catch (thrown) {
          const error = thrown as GatewayError;
          const failure = classify(routing, forwarding, error);
          state.attempts.push({
            provider: leg.provider.id,
            model: leg.route.model.id,
            upstreamModel: leg.upstreamModel,
            outcome: failure.retryable ? 'failed' : 'refused',
          });
          return failure;
        } finally {
          // Nothing reached the client (a failure, or a client gone, before the answer): nothing is
          // charged, whatever a translated stream told before it failed.
          if (!answered) translatedUsage = undefined;
          ended(usage);
        }
      };

      const sequence = route.alone ?? (await plan(ctx, route, reachable ?? candidates(route, body, headers, planner), planner));
      const startedAt = nowMs();
      // Deployments that began to cool down during this call: passed over while another is left.
      const cooled = new Set<Leg>();
      let failure: Failure | undefined;
      let previous: Leg | undefined;
      let number = 0;
      try {
        for (let position = 0; number < routing.maxAttempts; position++) {
          const leg = nextLeg(sequence, position, cooled);
          if (number > 0) {
            const wait = backoffMs(routing, number, leg === previous ? failure?.retryAfterMs : undefined);
            if (routing.budgetMs !== undefined && nowMs() - startedAt + wait >= routing.budgetMs) break;
            await routing.sleep(wait);
          }
          // What is left of the budget bounds the whole answer, however many bytes trickle in; without one, timeoutMs does.
          const answerMs = routing.budgetMs === undefined ? timeoutMs : routing.budgetMs - (nowMs() - startedAt);
          const silenceMs = Math.min(timeoutMs, answerMs);
          if (silenceMs <= 0) break;
          number++;
          failure = await attempt(leg, number, silenceMs, answerMs);
          if (failure === undefined) {
            cached?.store();
            return;
          }
          previous = leg;
          if (!failure.retryable) break;
          const coolsDown = await learn(ctx, leg, failure, routing, nowMs);
          if (coolsDown) cooled.add(leg);
          if (number < routing.maxAttempts)
            ctx.app.emit(
              'error',
              new AttemptFailedError(leg.provider.id, leg.upstreamModel, number, failure.outcome, { cause: failure.error.cause ?? failure.error }),
              ctx,
            );
        }
        const err = failure?.error ?? errors.upstreamTimeout();
        Object.assign(err.headers, { 'x-kmg-attempts': String(number), 'x-kmg-deployment': state.provider });
        throw err;
      } finally {
        const tokens = state.inputTokens + state.outputTokens;
        // Not awaited: the answer does not wait for the count. A limiter that fails is reported.
        if (tokens > 0) void addTokens(limiter, key.id, limits, tokens).catch((err: unknown) => ctx.app.emit('error', err, ctx));
      }
    } finally {
      void budgets.charge(budget.parties, state.costPicoUsd, budget.reservation).catch((err: unknown) => ctx.app.emit('error', err, ctx));
    }
  };
}

/** A model of the catalog that this endpoint does not serve: a 400 naming it and where it is served. */
function wrongModelType(model: string, type: 'chat' | 'embeddings'): GatewayError {
  return type === 'embeddings'
    ? errors.invalidRequest(`The model '${model}' is an embeddings model: it is served on /v1/embeddings only`)
    : errors.invalidRequest(`The model '${model}' is not an embeddings model: it is served on the chat endpoints, not /v1/embeddings`);
}

/** The dearest price of each kind among the models a call may reach (its model's, its fallbacks'): what its reservation counts by. */
function dearest(route: ModelRoute): TokenPrice {
  const price: TokenPrice = { ...route.price };
  for (const { route: reached } of route.legs) {
    for (const kind of ['input', 'output', 'cacheRead', 'cacheWrite'] as const) price[kind] = Math.max(price[kind], reached.price[kind]);
  }
  return price;
}

/** The most output tokens a call may get from the models it may reach, as their catalog entries say; `fallback` for one that does not. */
function longestAnswer(route: ModelRoute, fallback: number): number {
  return Math.max(route.model.maxOutputTokens ?? fallback, ...route.legs.map(({ route: reached }) => reached.model.maxOutputTokens ?? fallback));
}

/** The size of the request body in bytes: as declared, else as parsed (without its whitespace). */
function requestBytes(ctx: Context, body: Record<string, unknown>): number {
  const declared = Number(ctx.req.headers['content-length']);
  return Number.isSafeInteger(declared) && declared >= 0 ? declared : Buffer.byteLength(JSON.stringify(body));
}

// Async, so that a limiter that throws at once still ends in the caller's catch.
async function addTokens(limiter: ModelLimiter, keyId: string, limits: ModelLimits, tokens: number): Promise<void> {
  await limiter.addTokens(keyId, limits, tokens);
}

/** The client's headers meant for the upstream (`names`, lower-case), those it sent. */
function forwardedHeaders(ctx: Context, names: readonly string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of names) {
    const value = ctx.get(name);
    if (value !== '') headers[name] = value;
  }
  return headers;
}
