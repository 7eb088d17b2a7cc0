import type { Context } from 'koa';
import { z } from 'zod';
import { spendBudgets, type SpendBudgets } from '../cost/budgets.js';
import type { BlobStore } from '../files/blob-store.js';
import type { FileStore } from '../files/file-store.js';
import { MemoryModelLimiter } from '../stores/memory/model-limiter.js';
import { MemorySpendLedger } from '../stores/memory/spend-ledger.js';
import type { ModelLimiter } from '../quota/model-limiter.js';
import { modelLimitsSchema, type ModelLimits } from '../quota/model-limits.js';
import { parseOptions, positiveInteger, timerMs } from '../settings/schemas.js';
import { isCachedEndpoint } from './cache/cached-answer.js';
import { ResponseCaching, type ResponseCachingOptions } from './cache/response-caching.js';
import { endpointCatalogOptions, type CatalogModel } from './catalog.js';
import { admit } from './endpoint/admit.js';
import type { EndpointSetup } from './endpoint/call.js';
import { countRequest, reserve } from './endpoint/charge.js';
import { route } from './endpoint/route.js';
import { settle } from './endpoint/settle.js';
import type { EndpointFormat } from './endpoint-format.js';
import type { Provider } from './provider.js';
import { modelRoutes } from './routing/deployments.js';
import { candidates } from './routing/plan.js';
import { routingOptions, type RoutingOptions } from './routing/routing-options.js';
import { DEFAULT_MAX_UPSTREAM_BYTES } from './upstream-call.js';

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
 * The request handling every model endpoint shares, as a function of `ctx`, in four steps:
 * `admit()` (the body, the model through the one allowlist policy, attached files), the request
 * limits and the budget's reservation (`countRequest()`, `reserve()`), `route()` (the attempts on
 * the model's deployments, answering naming the catalog id) and `settle()` (tokens and cost,
 * however the call ended). Check order as decisions.md fixes it: permission (403), validation
 * (400/413), existence (404), limits (429); a refused call sends nothing upstream.
 */
export function modelEndpoint(format: EndpointFormat, options: ModelEndpointOptions): (ctx: Context) => Promise<void> {
  const setup = endpointSetup(format, options);
  const { caching, planner } = setup;
  return async (ctx) => {
    const call = await admit(ctx, setup);
    const { key, model, route: named, body, headers, state } = call;
    // After the request limits' checks, before the budgets': a hit costs nothing, but counts as a request.
    const cached = await caching?.lookup(ctx, { key, format, model, modelTtlSeconds: named.model.cache?.ttlSeconds, body, headers, state });
    if (cached?.hit) {
      await countRequest(ctx, setup, call);
      cached.replay();
      return;
    }
    // Read beside the reservation: on Redis, the cooldowns in the same round trip as the limits.
    const reachable = named.alone === undefined ? candidates(named, body, headers, planner) : undefined;
    // Before the rate limits: a call the budget refuses counts no request.
    const budget = await reserve(ctx, setup, call);
    // From here the call holds a reservation: however it ends, its cost replaces it.
    try {
      await countRequest(ctx, setup, call, budget.decision);
      await route(ctx, setup, call, reachable, cached);
    } finally {
      settle(ctx, setup, call, budget);
    }
  };
}

/** What every call of one endpoint shares, checked once: a bad option is named at start-up. */
function endpointSetup(format: EndpointFormat, options: ModelEndpointOptions): EndpointSetup {
  const where = `${format.endpoint}()`;
  const { catalog, providers } = endpointCatalogOptions(options, where);
  const { timeoutMs, bodyLimit, maxUpstreamBytes, maxAttachedBytes, modelLimits, modelLimiter } = parseOptions(endpointLimits, options, where);
  if ((options.files === undefined) !== (options.blobs === undefined)) {
    throw new TypeError(`koa-model-gateway: ${where}: files and blobs go together: give both or neither`);
  }
  const nowMs = options.nowMs ?? Date.now;
  if (options.budgets !== undefined && typeof options.budgets.check !== 'function') {
    throw new TypeError(`koa-model-gateway: ${where}: budgets must come from spendBudgets()`);
  }
  const routing = routingOptions(options.routing, where);
  const routes = modelRoutes(catalog, providers, format.endpoint);
  return {
    format,
    catalogIds: new Set(routes.keys()),
    servedType: format.endpoint === 'embeddings' ? 'embeddings' : 'chat',
    planner: { routes, routing, nowMs },
    limiter: modelLimiter ?? new MemoryModelLimiter({ nowMs }),
    modelLimits,
    budgets: options.budgets ?? spendBudgets({ ledger: new MemorySpendLedger({ nowMs }) }),
    stores: options.files && options.blobs && { files: options.files, blobs: options.blobs },
    // Embeddings and counts of tokens are never cached: their answers say nothing of the cache.
    caching: options.cache && isCachedEndpoint(format.endpoint) ? new ResponseCaching(options.cache, where) : undefined,
    nowMs,
    timeoutMs,
    bodyLimit,
    maxUpstreamBytes,
    maxAttachedBytes,
  };
}
