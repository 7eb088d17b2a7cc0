import { performance } from 'node:perf_hooks';
import type { RouterContext } from '@koa/router';
import type { Context, Middleware } from 'koa';
import { afterResponse } from '../http/after-response.js';
import { answeredStatus } from '../http/answered-status.js';
import { newRequestId } from '../errors/request-id.js';
import type { GatewayMetrics } from '../metrics/gateway-metrics.js';
import type { UsageRecorder } from '../usage/usage-recorder.js';
import type { UsageRecord } from '../usage/usage-store.js';

export interface MeterModelCallsOptions {
  /** Where each call's record goes: `usageRecorder()`, which writes in batches. Default: none. */
  usageRecorder?: Pick<UsageRecorder, 'record'>;
  /**
   * The metrics each call feeds (upstream time, time to first byte, tokens, limit refusals, attempts and cooldowns):
   * `createGatewayMetrics()` from `koa-model-gateway/metrics`. Default: none.
   */
  metrics?: Pick<GatewayMetrics, 'observeModelCall' | 'limitRefused'> & Partial<Pick<GatewayMetrics, 'observeRouting' | 'cacheLookedUp'>>;
  /** The clock of the records' `time`, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
}

function usageRecord(ctx: Context, time: number, started: number): UsageRecord | undefined {
  const key = ctx.state.apiKey;
  if (key === undefined) return undefined;
  const call = ctx.state.modelRequest;
  const { res } = ctx;
  const route = (ctx as Partial<RouterContext>).routerPath;
  return {
    time,
    requestId: ctx.state.requestId ?? newRequestId(),
    keyId: key.id,
    account: key.account,
    endpoint: typeof route === 'string' ? route : ctx.path,
    // Set once the model is resolved: a name the client made up is never recorded.
    model: call?.model ?? null,
    provider: call?.provider ?? null,
    upstreamModel: call?.upstreamModel ?? null,
    attempts: call?.attempts.length ?? 0,
    traceId: ctx.state.tracing?.traceId || null,
    status: answeredStatus(res),
    stream: call?.stream ?? false,
    inputTokens: call?.inputTokens ?? 0,
    outputTokens: call?.outputTokens ?? 0,
    attachments: call?.attachments ?? 0,
    latencyMs: performance.now() - started,
    upstreamFirstByteMs: call?.upstreamFirstByteMs ?? null,
    upstreamMs: call?.upstreamMs ?? null,
    costPicoUsd: call?.costPicoUsd ?? 0,
    // A lookup the store failed is a miss to the caller: the call went upstream.
    ...(call?.cache !== undefined && call.cache !== 'bypass' && { cache: call.cache === 'hit' ? 'hit' : 'miss' }),
    ...(call?.costSavedPicoUsd !== undefined && { costSavedPicoUsd: call.costSavedPicoUsd }),
  };
}

/**
 * Meters every call of the model endpoint after it: one `UsageRecord` when the answer has ended
 * (sent, refused, failed or left by the client), with the status the client got and what the
 * handler put on `ctx.state.modelRequest` (the catalog model, its provider, the upstream's usage
 * and timings); and the metrics of the call. Put it before `requireScope()` and the handler, after
 * `apiKey()`, so that refusals count too; a request without a verified key is not recorded.
 * Recording is synchronous and does no I/O: `usageRecorder()` writes in the background.
 * @example router.post('/v1/chat/completions', meterModelCalls({ usageRecorder, metrics }), requireScope('chat:completions'), chatCompletions(options))
 */
export function meterModelCalls(options: MeterModelCallsOptions = {}): Middleware {
  const { usageRecorder, metrics, nowMs = Date.now } = options;
  if (usageRecorder !== undefined && typeof usageRecorder.record !== 'function') {
    throw new TypeError('koa-model-gateway: meterModelCalls() usageRecorder must be a usageRecorder()');
  }
  if (metrics !== undefined && typeof metrics.observeModelCall !== 'function') {
    throw new TypeError('koa-model-gateway: meterModelCalls() metrics must come from createGatewayMetrics()');
  }
  if (typeof nowMs !== 'function') throw new TypeError('koa-model-gateway: meterModelCalls() nowMs must be a function');
  return async function meterModelCalls(ctx, next) {
    const time = nowMs();
    const started = performance.now();
    await afterResponse(ctx, next, () => {
      const record = usageRecord(ctx, time, started);
      if (record === undefined) return;
      usageRecorder?.record(record);
      metrics?.observeModelCall(record);
      const call = ctx.state.modelRequest;
      if (call !== undefined) metrics?.observeRouting?.(call);
      if (call?.cache !== undefined) metrics?.cacheLookedUp?.(call.cache);
      const limitedBy = ctx.state.modelRequest?.limitedBy;
      if (limitedBy !== undefined) metrics?.limitRefused(limitedBy);
    });
  };
}
