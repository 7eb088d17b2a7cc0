import type { Readable } from 'node:stream';
import type { Context } from 'koa';
import { z } from 'zod';
import { verifiedKey } from '../auth/api-key.js';
import { modelAccess } from '../auth/model-access.js';
import { MemorySpendLedger, spendBudgets, type SpendBudgets } from '../cost/budgets.js';
import { callCost, tokenPrice, type TokenPrice } from '../cost/price.js';
import { errors, GatewayError } from '../errors/gateway-error.js';
import { newRequestId } from '../errors/request-id.js';
import type { BlobStore } from '../files/blob-store.js';
import { isFileId } from '../files/file-id.js';
import type { FileStore } from '../files/file-store.js';
import { MemoryModelLimiter } from '../quota/memory-model-limiter.js';
import type { ModelLimiter } from '../quota/model-limiter.js';
import { modelLimitsSchema, type ModelLimits } from '../quota/model-limits.js';
import { modelLimitRefusal, rateLimitHeaders, type RateLimitHeaderStyle } from '../quota/rate-limit-headers.js';
import { parseOptions, positiveInteger } from '../settings/schemas.js';
import type { AnswerFormat, TokenUsage } from './answer.js';
import { findAttachments, readAttachments, type FileReferences, type FileStores } from './attachments.js';
import { endpointCatalogOptions, type CatalogModel, type ResolvedModel } from './catalog.js';
import { isObject, type JsonObject } from './content.js';
import { translation, type Translation } from './formats/translate.js';
import { readJsonBody } from './json-body.js';
import type { Provider, ProviderAnswer, ProviderEndpoint, ProviderRequest } from './provider.js';
import { EventSplitter } from './server-sent-events.js';
import { AttemptFailedError } from './routing/attempt-failed.js';
import { backoffMs, retryAfterMs as retryAfter, routingOptions, weightedOrder, type Routing, type RoutingOptions } from './routing/routing-options.js';
import { answerHeader, discard, providerAnswer, UpstreamCall } from './upstream-call.js';

/** Options of `chatCompletions()`, `responses()`, `messages()` and `countTokens()`. */
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
  /** Largest total of the files attached to one request, in bytes. Default 32 MiB (33,554,432), both providers' request limit. */
  maxAttachedBytes?: number;
  /** The clock for file expiry (and, in `modelsRouter()`, the time of usage records), in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
  /**
   * Counts every key's model calls against its limits: `MemoryModelLimiter` for one process,
   * `RedisModelLimiter` for several. Default: a `MemoryModelLimiter` of the handler's own
   * (`modelsRouter()` makes one for all its endpoints, so that a key's limits count every call).
   */
  limiter?: ModelLimiter;
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
}

/**
 * What a model handler puts on `ctx.state.modelRequest` once the model is resolved, and fills in
 * as the call goes on: for the request log, the usage record and the metrics.
 */
export interface ModelRequestState {
  /** The catalog id the client asked for. */
  model: string;
  provider: string;
  upstreamModel: string;
  stream: boolean;
  /** How many stored files were attached. */
  attachments: number;
  /** The provider's format when it does not speak the endpoint's and the call is translated. */
  translatedTo?: ProviderEndpoint;
  /** Set when the key's limits refused the call (429): which of them. */
  limitedBy?: 'requests' | 'tokens' | 'budget';
  /** Tokens of the answer, from the upstream's own usage; 0 until its answer has ended, and when it reported none. */
  inputTokens: number;
  outputTokens: number;
  /** From the upstream call to the first byte of its answer, in ms; null when no upstream call was made. */
  upstreamFirstByteMs: number | null;
  /** From the upstream call to the end of its answer, in ms; null until it has ended, and when no upstream call was made. */
  upstreamMs: number | null;
  /** The answer's tokens at the model's price, in picodollars (`callCost()`); 0 until its answer has ended. */
  costPicoUsd: number;
  /** Every upstream attempt of the call, in order: its deployment, its catalog model (the named one or a fallback) and how it ended (`ok`, `failed`: retryable, `refused`: not). */
  attempts: Array<{ provider: string; model: string; upstreamModel: string; outcome: 'ok' | 'failed' | 'refused' }>;
  /** The providers of the deployments whose failure in this call made them cool down. */
  cooldowns: string[];
  /** The deployments the call found cooling down, and until when (ms since the epoch); unset when it did not look. */
  cooling?: Array<{ deployment: string; until: number }>;
}

declare module 'koa' {
  interface DefaultState {
    /** Set by `chatCompletions()` / `messages()` once the model is resolved. */
    modelRequest?: ModelRequestState;
  }
}

/** What differs between the endpoints. */
export interface EndpointFormat {
  endpoint: ProviderEndpoint;
  /**
   * The answer for a model outside the key's allowlist, given before the request is validated
   * further. Left out (Messages), such a model gets `modelNotFound`, at the same point as an
   * unknown one, so that the two cannot be told apart.
   */
  modelNotAllowed?: (model: string) => GatewayError;
  modelNotFound: (model: string) => GatewayError;
  /** The model's provider does not speak this endpoint's format, nor one it can be translated to. */
  unsupported: (model: string) => GatewayError;
  fileReferences: FileReferences;
  /** Client headers passed to the provider, lower-case. */
  forwardHeaders: readonly string[];
  /** A failure after the stream has started, as an event of this format. */
  errorEvent: (err: GatewayError, requestId: string) => string;
  /** Where its answers carry usage and the model's name. */
  answer: AnswerFormat;
  /** Whose rate-limit headers its answers carry. */
  rateLimitStyle: RateLimitHeaderStyle;
}

const endpointLimits = z.object({
  timeoutMs: positiveInteger.default(300_000),
  bodyLimit: positiveInteger.default(10 * 1024 * 1024),
  maxAttachedBytes: positiveInteger.default(32 * 1024 * 1024),
  modelLimits: modelLimitsSchema.default({}),
  limiter: z
    .custom<ModelLimiter>((value) => typeof (value as Partial<ModelLimiter>)?.consume === 'function' && typeof (value as Partial<ModelLimiter>).addTokens === 'function', {
      error: 'must be a ModelLimiter (MemoryModelLimiter, RedisModelLimiter)',
    })
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
  const { timeoutMs, bodyLimit, maxAttachedBytes, modelLimits, limiter = new MemoryModelLimiter() } = parseOptions(endpointLimits, options, where);
  if ((options.files === undefined) !== (options.blobs === undefined)) {
    throw new TypeError(`koa-model-gateway: ${where}: files and blobs go together: give both or neither`);
  }
  const stores: FileStores | undefined = options.files && options.blobs && { files: options.files, blobs: options.blobs };
  const nowMs = options.nowMs ?? Date.now;
  if (options.budgets !== undefined && typeof options.budgets.check !== 'function') {
    throw new TypeError(`koa-model-gateway: ${where}: budgets must come from spendBudgets()`);
  }
  const budgets = options.budgets ?? spendBudgets({ ledger: new MemorySpendLedger({ nowMs }) });
  const routing = routingOptions(options.routing, where);
  const byId = new Map(providers.map((provider) => [provider.id, provider]));
  const routes = new Map<string, ModelRoute>();
  for (const model of catalog) {
    const route: ModelRoute = { model, price: tokenPrice(model.price), legs: [] };
    for (const { provider: providerId, upstreamModel, weight } of model.deployments) {
      const provider = byId.get(providerId);
      if (provider === undefined) continue;
      const native = provider[format.endpoint]?.bind(provider);
      // A provider that speaks the format is called natively; another is translated to when it can be.
      const translated = native ? undefined : translation(format.endpoint, provider);
      const send = native ?? translated?.send;
      if (send !== undefined) route.legs.push({ route, provider, upstreamModel, weight, key: `${provider.id}/${upstreamModel}`, send, translation: translated });
    }
    routes.set(model.id, route);
  }
  const catalogIds = new Set(routes.keys());

  /**
   * The deployments a call tries, in order: the named model's healthy ones in a weighted random
   * order, then each fallback's that can carry the request; when every one is cooling down, the
   * one that comes back first. A one-deployment model without fallbacks asks the store nothing.
   */
  async function plan(ctx: Context, named: ModelRoute, body: JsonObject): Promise<Leg[]> {
    const headers = forwardedHeaders(ctx, format.forwardHeaders);
    const fallbacks = named.model.fallbacks.flatMap((id) => routes.get(id)?.legs.filter((leg) => carries(leg, body, headers)) ?? []);
    const all = [...named.legs, ...fallbacks];
    if (all.length === 1) return all;
    let until: Array<number | null>;
    try {
      until = await routing.store.coolingUntil(
        all.map((leg) => leg.key),
        nowMs(),
      );
    } catch (err) {
      // What cannot be read is no reason to refuse the call: route as if nothing cooled down.
      ctx.app.emit('error', err, ctx);
      until = all.map(() => null);
    }
    const coolingUntil = new Map(all.map((leg, index) => [leg, until[index] ?? null]));
    const cooling = all.filter((leg) => coolingUntil.get(leg) !== null);
    if (ctx.state.modelRequest) ctx.state.modelRequest.cooling = cooling.map((leg) => ({ deployment: leg.key, until: coolingUntil.get(leg) as number }));
    const healthy = (legs: Leg[]) => weightedOrder(legs.filter((leg) => coolingUntil.get(leg) === null), routing.random);
    const models = [named.legs, ...named.model.fallbacks.map((id) => fallbacks.filter((leg) => leg.route.model.id === id))];
    const order = models.flatMap(healthy);
    if (order.length > 0) return order;
    return [cooling.reduce((first, leg) => ((coolingUntil.get(leg) as number) < (coolingUntil.get(first) as number) ? leg : first))];
  }

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

    const route = access === 'allowed' ? routes.get(requested) : undefined;
    if (route === undefined) throw format.modelNotFound(requested);
    const first = route.legs[0];
    if (first === undefined) throw format.unsupported(requested);
    const headers = forwardedHeaders(ctx, format.forwardHeaders);
    // What cannot be carried over is refused here, a validation error like any other.
    for (const leg of route.legs) leg.translation?.check(body, headers);

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
    const files = checkedIds.length === 0 ? [] : await findAttachments(stores, key.account, checkedIds, Math.floor(nowMs() / 1000), maxAttachedBytes);

    const limits: ModelLimits = { ...modelLimits, ...key.limits };
    // Before the rate limits: a call the budget refuses counts no request.
    const budget = await budgets.check(key, limits);
    if (budget.refusal) {
      state.limitedBy = 'budget';
      throw budget.refusal;
    }
    // Once per client call, however many attempts it takes.
    const decision = await limiter.consume(key.id, limits);
    if (!decision.allowed) {
      if (decision.refusedBy) state.limitedBy = decision.refusedBy;
      throw modelLimitRefusal(decision, format.rateLimitStyle);
    }
    ctx.set(rateLimitHeaders(decision, format.rateLimitStyle));

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
     * attempt's are the call's.
     */
    const attempt = async (leg: Leg, number: number, silenceMs: number): Promise<Failure | undefined> => {
      const { translation: translated, send } = leg;
      Object.assign(state, { provider: leg.provider.id, upstreamModel: leg.upstreamModel, translatedTo: translated?.target });
      if (translated === undefined) delete state.translatedTo;
      ctx.set({ 'x-kmg-attempts': String(number), 'x-kmg-deployment': leg.provider.id });
      const inlined = { ...withFiles, model: leg.upstreamModel };
      const upstreamBody = stream && format.answer.streamRequest ? format.answer.streamRequest(inlined) : inlined;
      const trace = ctx.state.tracing?.attempt({ endpoint: format.endpoint, provider: leg.provider, model: requested, body: upstreamBody, stream });
      const call = new UpstreamCall(leg.provider.id, silenceMs, trace);
      let usage: TokenUsage = { inputTokens: 0, outputTokens: 0 };
      // What a translated stream told in the provider's format, which the client's may tell only at its end.
      let translatedUsage: TokenUsage | undefined;
      const sendCall = translated
        ? async (request: ProviderRequest) => {
            const answer = await translated.send(request);
            translatedUsage = answer.usage;
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
              inputTokens: Math.max(answered.inputTokens, translatedUsage.inputTokens),
              outputTokens: Math.max(answered.outputTokens, translatedUsage.outputTokens),
            }
          : answered;
        call.end();
        Object.assign(state, usage, { upstreamFirstByteMs: call.firstByteMs, upstreamMs: call.durationMs, costPicoUsd: callCost(leg.route.price, usage) });
      };
      const path = UPSTREAM_PATHS[translated?.target ?? format.endpoint];
      const forwarding: Forwarding = { format, call, stream, request: body, model: requested, provider: leg.provider.id, path, ended, delivered: false };
      try {
        await forward(ctx, forwarding, () => sendCall({ body: upstreamBody, headers, signal: call.signal, traceHeaders: call.traceHeaders }));
        state.attempts.push({ provider: leg.provider.id, model: leg.route.model.id, upstreamModel: leg.upstreamModel, outcome: 'ok' });
        return undefined;
      } catch (thrown) {
        const error = thrown as GatewayError;
        const failure = classify(routing, forwarding, error);
        state.attempts.push({ provider: leg.provider.id, model: leg.route.model.id, upstreamModel: leg.upstreamModel, outcome: failure.retryable ? 'failed' : 'refused' });
        return failure;
      } finally {
        ended(usage);
      }
    };

    const sequence = await plan(ctx, route, body);
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
        const left = routing.budgetMs === undefined ? timeoutMs : Math.min(timeoutMs, routing.budgetMs - (nowMs() - startedAt));
        if (left <= 0) break;
        number++;
        failure = await attempt(leg, number, left);
        if (failure === undefined) return;
        previous = leg;
        if (!failure.retryable) break;
        const coolsDown = await learn(ctx, leg, failure);
        if (coolsDown) cooled.add(leg);
        if (number < routing.maxAttempts) ctx.app.emit('error', new AttemptFailedError(leg.provider.id, leg.upstreamModel, number, failure.outcome, { cause: failure.error.cause ?? failure.error }), ctx);
      }
      const err = failure?.error ?? errors.upstreamTimeout();
      Object.assign(err.headers, { 'x-kmg-attempts': String(number), 'x-kmg-deployment': state.provider });
      throw err;
    } finally {
      const tokens = state.inputTokens + state.outputTokens;
      // Not awaited: the answer does not wait for the count. A limiter that fails is reported.
      if (tokens > 0) void countTokens(limiter, key.id, limits, tokens).catch((err: unknown) => ctx.app.emit('error', err, ctx));
      if (state.costPicoUsd > 0) void budgets.charge(budget.parties, state.costPicoUsd).catch((err: unknown) => ctx.app.emit('error', err, ctx));
    }
  };

  /** Tells the cooldown store of a failure; true when the deployment now cools down. */
  async function learn(ctx: Context, leg: Leg, failure: Failure): Promise<boolean> {
    const retryAfter = failure.status === 429 ? failure.retryAfterMs : undefined;
    try {
      const until = await routing.store.fail(leg.key, routing.policy, nowMs(), retryAfter);
      if (until === null) return false;
      ctx.state.modelRequest?.cooldowns.push(leg.provider.id);
      return true;
    } catch (err) {
      ctx.app.emit('error', err, ctx);
      return false;
    }
  }
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

/** Whether `leg` can carry `body` (a fallback in another format may not: it is passed over). */
function carries(leg: Leg, body: JsonObject, headers: Readonly<Record<string, string>>): boolean {
  try {
    leg.translation?.check(body, headers);
    return true;
  } catch {
    return false;
  }
}

/** The deployment of attempt `position`: the plan's in turn, from the start again when it is used up, past those cooling down. */
function nextLeg(sequence: readonly Leg[], position: number, cooled: ReadonlySet<Leg>): Leg {
  for (let offset = 0; offset < sequence.length; offset++) {
    const leg = sequence[(position + offset) % sequence.length] as Leg;
    if (!cooled.has(leg)) return leg;
  }
  return sequence[position % sequence.length] as Leg;
}

/** A failed attempt: what the client would be told, and whether another attempt may follow. */
interface Failure {
  error: GatewayError;
  retryable: boolean;
  /** The upstream's status, when it answered one. */
  status: number | undefined;
  retryAfterMs: number | undefined;
  /** For the metric and the log: `ok`, a status, `timeout`, or an error code. */
  outcome: string;
}

/**
 * Whether a failed attempt is retried (decisions.md): never once the client has a byte of the
 * answer; a connection error or a timeout before the upstream's first byte, or one of the retried
 * statuses; a 2xx stream that failed before its first event reached the client.
 */
function classify(routing: Routing, forwarding: Forwarding, error: GatewayError): Failure {
  const { answer, thrown, call } = forwarding;
  const status = answer?.statusCode;
  const retryAfterMs = answer && retryAfter({ get: (name) => answerHeader(answer, name) }, Date.now());
  const outcome = status !== undefined ? String(status) : call.timedOut ? 'timeout' : errorClass(thrown);
  let retryable: boolean;
  if (forwarding.delivered) retryable = false;
  else if (status === undefined) retryable = !(thrown instanceof GatewayError) || routing.retryStatuses.has(thrown.status);
  else if (status >= 200 && status <= 299) retryable = forwarding.stream;
  else retryable = routing.retryStatuses.has(status);
  return { error, retryable, status, retryAfterMs, outcome };
}

function errorClass(thrown: unknown): string {
  if (thrown instanceof GatewayError) return String(thrown.status);
  const { code } = (thrown ?? {}) as { code?: unknown };
  return typeof code === 'string' ? code : 'error';
}

// Async, so that a limiter that throws at once still ends in the caller's catch.
async function countTokens(limiter: ModelLimiter, keyId: string, limits: ModelLimits, tokens: number): Promise<void> {
  await limiter.addTokens(keyId, limits, tokens);
}

/** The API path of each format, as the error of an upstream without it names it. */
const UPSTREAM_PATHS: Readonly<Record<ProviderEndpoint, string>> = {
  chatCompletions: '/v1/chat/completions',
  responses: '/v1/responses',
  messages: '/v1/messages',
  countTokens: '/v1/messages/count_tokens',
};

/**
 * The error for an upstream's 404. One with an API error in its body (an unknown upstream model)
 * is the gateway's configuration: 502, as other unexpected statuses. One without (a server that
 * has no such path: vLLM's `{"detail":"Not Found"}`, a plain-text page) would fail as often as
 * it is retried: a 404 naming the path, which no SDK retries.
 */
async function missingPath(call: UpstreamCall, answer: ProviderAnswer, { provider, path }: Forwarding): Promise<GatewayError> {
  const text = await call.text(answer.body);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    // A page of text: no API answered.
  }
  if (isObject(body) && isObject(body.error)) return call.malformed('answered HTTP 404');
  return errors.upstreamPathNotFound(provider, path);
}

/** A catalog model, its price and its deployments that can serve the endpoint's format. */
interface ModelRoute {
  model: ResolvedModel;
  /** The model's price per token, made once. */
  price: TokenPrice;
  legs: Leg[];
}

/**
 * One deployment of a model, and how a call reaches it: the provider's method for the endpoint's
 * format, or the translation to one it speaks.
 */
interface Leg {
  route: ModelRoute;
  provider: Provider;
  upstreamModel: string;
  weight: number;
  /** The deployment's name in the cooldown store. */
  key: string;
  send: (request: ProviderRequest) => Promise<ProviderAnswer | Response>;
  translation: Translation | undefined;
}

const EVENT_STREAM = /^text\/event-stream\b/i;

/** One call as `forward()` sees it. */
interface Forwarding {
  format: EndpointFormat;
  call: UpstreamCall;
  stream: boolean;
  /** The client's own body: what it asked for. */
  request: JsonObject;
  /** The catalog id the client asked for, which the answer names. */
  model: string;
  /** The provider's id and the path of its format's API, for the error of an upstream without it. */
  provider: string;
  path: string;
  /** Told the answer's usage when the upstream's answer has ended, before the client's has. */
  ended: (usage: TokenUsage) => void;
  /** The upstream's answer, once its status and headers arrived. */
  answer?: ProviderAnswer;
  /** What the attempt failed of, as it was thrown. */
  thrown?: unknown;
  /** True once a byte of the answer reached the client: nothing may be retried after. */
  delivered: boolean;
}

/** Sends the request upstream and answers the client with the result, streamed or whole. */
async function forward(ctx: Context, forwarding: Forwarding, send: () => Promise<ProviderAnswer | Response>): Promise<void> {
  const { format, call, stream, model } = forwarding;
  const onClose = () => {
    if (!ctx.res.writableFinished) call.abandon();
  };
  ctx.res.once('close', onClose);
  try {
    const answer = providerAnswer(await send());
    forwarding.answer = answer;
    call.answered(answer);
    if (answer.statusCode === 404) throw await missingPath(call, answer, forwarding);
    if (answer.statusCode < 200 || answer.statusCode > 299) throw await call.refusal(answer);
    if (!stream) {
      const json = await call.json(answer);
      forwarding.ended(format.answer.json(json, model));
      ctx.body = json;
      return;
    }
    if (!EVENT_STREAM.test(answerHeader(answer, 'content-type'))) {
      discard(answer.body);
      throw call.malformed('answered a streaming request without an event stream');
    }
    await relayEvents(ctx, forwarding, answer.body);
  } catch (thrown) {
    // Nobody is left to answer: end quietly, with nginx's "client closed request" for the log.
    if (call.clientGone) {
      ctx.status = 499;
      return;
    }
    forwarding.thrown = thrown;
    throw call.failure(thrown);
  } finally {
    call.end();
    ctx.res.off('close', onClose);
  }
}

/**
 * Passes the upstream's events to the client as they arrive, each through the format's reader
 * (the catalog id in place of the upstream's model, usage read and, where the client did not ask
 * for it, withheld): one write per chunk of the upstream's, of the events it completes. From here
 * on the status and headers are sent, so this writes the response itself (no buffering, no
 * compression by Koa) and tells a failure as an error event of the endpoint's format, reporting
 * it on `app.on('error')` as the formatters do. Until its first event, nothing is sent: a failure
 * then is thrown, as one before the answer, and may be retried.
 */
async function relayEvents(ctx: Context, forwarding: Forwarding, body: Readable): Promise<void> {
  const { format, call } = forwarding;
  const reader = format.answer.stream(forwarding.request, forwarding.model);
  const splitter = new EventSplitter();
  const { res } = ctx;
  // The status and headers go with the first event: a stream that fails before it can still be retried.
  const start = () => {
    if (forwarding.delivered) return;
    forwarding.delivered = true;
    ctx.status = 200;
    ctx.set({ 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
    ctx.respond = false;
    res.flushHeaders();
  };
  // False when the client reads slowly: the upstream's body waits for it.
  const pass = (events: string[]) => {
    let out = '';
    for (const event of events) out += reader.event(event);
    if (out === '') return true;
    start();
    return res.write(out);
  };
  try {
    await call.read(body, (chunk) => pass(splitter.push(chunk)), res);
    pass(splitter.end());
    start();
  } catch (thrown) {
    if (!forwarding.delivered) throw thrown;
    if (!call.clientGone) {
      const err = call.failure(thrown);
      ctx.app.emit('error', err, ctx);
      res.write(format.errorEvent(err, ctx.state.requestId ?? newRequestId()));
    }
  }
  // What was read counts, if the stream failed or the client left too.
  forwarding.ended(reader.usage);
  if (!call.clientGone) res.end();
}
