import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { usdOfPico } from '../picodollars.js';
import type { ModelRequestState } from '../state.js';
import type { UsageRecord } from '../usage/usage-store.js';

/** Which limit refused: a key's model requests or tokens, or one of the file limits. */
export type LimitKind = 'requests' | 'tokens' | 'budget' | 'file_creations' | 'file_ingestion' | 'file_storage';

/** One HTTP request, as `httpMetrics()` observes it. */
export interface ObservedRequest {
  /** A bounded name of the route (a pattern, never a raw path). */
  route: string;
  status: number;
  /** From the request's arrival to the end of its response. */
  seconds: number;
  /** Of those, the time spent waiting on an upstream provider; 0 when none was called. */
  upstreamSeconds: number;
}

/** What a model call adds: the fields of its usage record that metrics read. */
export type ObservedModelCall = Pick<
  UsageRecord,
  'model' | 'provider' | 'account' | 'inputTokens' | 'outputTokens' | 'upstreamFirstByteMs' | 'upstreamMs' | 'costPicoUsd'
>;

/** What a routed model call adds: its attempts, the cooldowns it began and those it found. */
export type ObservedRouting = Pick<ModelRequestState, 'attempts' | 'cooldowns' | 'cooling' | 'omitted'>;

/** The gateway's Prometheus metrics, on a registry of their own (`createGatewayMetrics()`). */
export interface GatewayMetrics {
  /** prom-client's registry of these metrics: `await registry.metrics()` is the text a scrape gets. */
  readonly registry: Registry;
  observeRequest(request: ObservedRequest): void;
  /**
   * Upstream time, time to first byte and tokens of a model call, labelled by catalog model id and
   * provider id. Calls that never reached an upstream (`upstreamMs: null`: refused, invalid, unknown
   * model) add nothing, so a label never holds a model name a client made up.
   */
  observeModelCall(call: ObservedModelCall): void;
  limitRefused(kind: LimitKind): void;
  /** Each upstream attempt of a model call by outcome, the cooldowns it began, and the deployments it found cooling down. */
  observeRouting(routing: ObservedRouting): void;
  /** Bytes of a file created by an upload. */
  uploaded(bytes: number): void;
  /** A model call that met the response cache: `hit`, `miss`, `bypass` or `error` (a miss because the store failed). */
  cacheLookedUp(outcome: 'hit' | 'miss' | 'bypass' | 'error'): void;
  /** How many catalog models have no known price (`priceCatalog()`'s `unpriced`): their calls cost 0. */
  unpricedModels(count: number): void;
  /** One MCP `tools/call` by server, tool and outcome (`mcpGateway()`): `tool` is `_other` for a name its server did not list. */
  observeToolCall(call: ObservedToolCall): void;
}

/** What an MCP `tools/call` adds. */
export interface ObservedToolCall {
  server: string;
  tool: string;
  outcome: string;
}

// Seconds. HTTP requests include model calls that stream for minutes; the gateway's own share
// is sub-millisecond.
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
const UPSTREAM_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const FIRST_BYTE_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * The gateway's metrics, each registered only in a `Registry` of its own (nothing in prom-client's
 * global registry), so that several gateways or tests in one process never share counts:
 *
 * | metric | labels |
 * |---|---|
 * | `kmg_http_requests_total` (counter) | `route`, `status` |
 * | `kmg_http_request_duration_seconds` (histogram) | `route` |
 * | `kmg_gateway_overhead_seconds` (histogram): the request's time minus its upstream time | `route` |
 * | `kmg_upstream_duration_seconds` (histogram) | `provider`, `model` |
 * | `kmg_upstream_time_to_first_byte_seconds` (histogram) | `provider`, `model` |
 * | `kmg_model_tokens_total` (counter) | `model`, `direction` (`input`, `output`) |
 * | `kmg_cost_usd_total` (counter): what model calls cost, in USD, at their models' prices | `model`, `account` |
 * | `kmg_upstream_attempts_total` (counter): upstream attempts, `outcome` `ok`, `failed` (retryable) or `refused` | `provider`, `model`, `outcome` |
 * | `kmg_deployment_cooldowns_total` (counter): cooldowns begun | `provider` |
 * | `kmg_deployments_cooling_down` (gauge): deployments cooling down, as this instance's calls found them | |
 * | `kmg_translation_omitted_total` (counter): fields translation left out of a client's request (`x-kmg-omitted`) | `field` |
 * | `kmg_limit_refusals_total` (counter) | `kind` |
 * | `kmg_uploaded_bytes_total` (counter) | |
 * | `kmg_cache_requests_total` (counter): model calls by how they met the response cache, `hit`, `miss`, `bypass` or `error` (its store failed: a miss) | `outcome` |
 * | `kmg_mcp_calls_total` (counter): MCP `tools/call`s, `outcome` as the usage record's | `server`, `tool`, `outcome` |
 * | `kmg_unpriced_models` (gauge): catalog models with no known price, whose calls cost 0 | |
 *
 * No label ever holds a key or a file name, and only `kmg_cost_usd_total` an account: one series
 * per account and model, for spend by account. Node's process metrics are left out; add
 * them with prom-client's `collectDefaultMetrics({ register: metrics.registry })`.
 *
 * How the gateway feeds it: `httpMetrics({ metrics })` first in the chain; the model endpoints call
 * `metrics.observeModelCall(record)` with the usage record of each call and
 * `metrics.limitRefused('requests' | 'tokens')` on a 429; the files router `metrics.uploaded(bytes)`
 * per created file and `limitRefused('file_…')` on its 429s. `serveMetrics({ metrics })` answers scrapes.
 * @example
 * const metrics = createGatewayMetrics()
 * app.use(httpMetrics({ metrics }))
 * new Koa().use(serveMetrics({ metrics })).listen(9464, '127.0.0.1')
 */
export function createGatewayMetrics(): GatewayMetrics {
  const registry = new Registry();
  const registers = [registry];
  const httpRequests = new Counter({
    name: 'kmg_http_requests_total',
    help: 'HTTP requests answered, by route pattern and status',
    labelNames: ['route', 'status'] as const,
    registers,
  });
  const httpDuration = new Histogram({
    name: 'kmg_http_request_duration_seconds',
    help: 'Time from the arrival of a request to the end of its response',
    labelNames: ['route'] as const,
    buckets: HTTP_BUCKETS,
    registers,
  });
  const overhead = new Histogram({
    name: 'kmg_gateway_overhead_seconds',
    help: "A request's time minus the time spent waiting on an upstream provider",
    labelNames: ['route'] as const,
    buckets: OVERHEAD_BUCKETS,
    registers,
  });
  const upstreamDuration = new Histogram({
    name: 'kmg_upstream_duration_seconds',
    help: 'Time from the upstream call to the end of its answer',
    labelNames: ['provider', 'model'] as const,
    buckets: UPSTREAM_BUCKETS,
    registers,
  });
  const firstByte = new Histogram({
    name: 'kmg_upstream_time_to_first_byte_seconds',
    help: 'Time from the upstream call to its first byte',
    labelNames: ['provider', 'model'] as const,
    buckets: FIRST_BYTE_BUCKETS,
    registers,
  });
  const tokens = new Counter({
    name: 'kmg_model_tokens_total',
    help: "Tokens of model calls, from the upstream's own usage",
    labelNames: ['model', 'direction'] as const,
    registers,
  });
  const cost = new Counter({
    name: 'kmg_cost_usd_total',
    help: "What model calls cost, in USD: the upstream's own token counts at the model's price",
    labelNames: ['model', 'account'] as const,
    registers,
  });
  const refusals = new Counter({
    name: 'kmg_limit_refusals_total',
    help: 'Requests refused by a limit (429)',
    labelNames: ['kind'] as const,
    registers,
  });
  const upstreamAttempts = new Counter({
    name: 'kmg_upstream_attempts_total',
    help: 'Upstream attempts of model calls, by outcome: ok, failed (retryable), refused (not retried)',
    labelNames: ['provider', 'model', 'outcome'],
    registers,
  });
  const cooldownsBegun = new Counter({
    name: 'kmg_deployment_cooldowns_total',
    help: 'Cooldowns begun by a deployment failing too often',
    labelNames: ['provider'],
    registers,
  });
  // When each deployment a call found cooling down comes back, as this instance last saw it.
  const coolingUntil = new Map<string, number>();
  new Gauge({
    name: 'kmg_deployments_cooling_down',
    help: 'Deployments cooling down, as the last calls of this instance found them',
    registers,
    collect() {
      const now = Date.now();
      for (const [deployment, until] of coolingUntil) if (until <= now) coolingUntil.delete(deployment);
      this.set(coolingUntil.size);
    },
  });
  // The names come from the formats' tables of fields: a bounded set, never a client's own word.
  const omittedFields = new Counter({
    name: 'kmg_translation_omitted_total',
    help: "Fields translation left out of a client's request, by name, as x-kmg-omitted names them",
    labelNames: ['field'],
    registers,
  });
  const uploadedBytes = new Counter({ name: 'kmg_uploaded_bytes_total', help: 'Bytes of files created by uploads', registers });
  const cacheRequests = new Counter({
    name: 'kmg_cache_requests_total',
    help: 'Model calls by how they met the response cache: hit, miss, bypass, error (its store failed: a miss)',
    labelNames: ['outcome'] as const,
    registers,
  });
  const toolCalls = new Counter({
    name: 'kmg_mcp_calls_total',
    help: 'MCP tools/call requests, by upstream server, tool and outcome',
    labelNames: ['server', 'tool', 'outcome'] as const,
    registers,
  });
  const unpriced = new Gauge({ name: 'kmg_unpriced_models', help: 'Catalog models with no known price: their calls cost 0', registers });

  return {
    registry,
    observeRequest({ route, status, seconds, upstreamSeconds }) {
      httpRequests.inc({ route, status: String(status) });
      httpDuration.observe({ route }, seconds);
      overhead.observe({ route }, Math.max(0, seconds - upstreamSeconds));
    },
    observeModelCall(call) {
      const { model, provider, upstreamMs, upstreamFirstByteMs } = call;
      if (upstreamMs === null || model === null || provider === null) return;
      upstreamDuration.observe({ provider, model }, upstreamMs / 1000);
      if (upstreamFirstByteMs !== null) firstByte.observe({ provider, model }, upstreamFirstByteMs / 1000);
      tokens.inc({ model, direction: 'input' }, call.inputTokens);
      tokens.inc({ model, direction: 'output' }, call.outputTokens);
      // Picodollars are exact; the counter's sum is a float, as every Prometheus counter's.
      cost.inc({ model, account: call.account }, usdOfPico(call.costPicoUsd));
    },
    limitRefused(kind) {
      refusals.inc({ kind });
    },
    observeRouting({ attempts, cooldowns, cooling, omitted }) {
      for (const { provider, model, outcome } of attempts) upstreamAttempts.inc({ provider, model, outcome });
      for (const provider of cooldowns) cooldownsBegun.inc({ provider });
      for (const field of omitted ?? []) omittedFields.inc({ field });
      for (const { deployment, until } of cooling ?? []) coolingUntil.set(deployment, until);
    },
    uploaded(bytes) {
      uploadedBytes.inc(bytes);
    },
    cacheLookedUp(outcome) {
      cacheRequests.inc({ outcome });
    },
    observeToolCall({ server, tool, outcome }) {
      toolCalls.inc({ server, tool, outcome });
    },
    unpricedModels(count) {
      unpriced.set(count);
    },
  };
}
