import { z } from 'zod';
import { alertThresholds, budgetUsd } from '../settings/budget-usd.js';
import { parseOptions, positiveInteger, settingsObject } from '../settings/schemas.js';
import { clockWindows, secondsUntil, type ClockWindow } from './clock-windows.js';

/**
 * Limits on one key's model calls, whatever the endpoint. Each is optional: absent is unlimited.
 * A deployment's defaults and a key's own limits combine field by field, the key's winning:
 * `{ ...defaults, ...key.limits }`.
 * @example const limits: ModelLimits = { requestsPerMinute: 60, tokensPerDay: 1_000_000 }
 */
export interface ModelLimits {
  /** Calls per clock minute (UTC, :00 to :59), counted as each call is let through. */
  requestsPerMinute?: number;
  /** Tokens (input + output) per clock minute, counted when an answer ends. */
  tokensPerMinute?: number;
  /** Tokens (input + output) per UTC day, counted when an answer ends. */
  tokensPerDay?: number;
  /** USD per UTC day (a positive number, at least one picodollar: `budgetUsd()`): the key's budget, its spend counted when an answer ends (`spendBudgets()`). */
  costPerDay?: number;
  /** USD per UTC calendar month (a positive number): the key's budget, as `costPerDay`. */
  costPerMonth?: number;
  /** Whether the key's budgets are soft: they alert, and never refuse a call (`Budget.costSoft`); `false` overrides a default of `true`. Default false. */
  costSoft?: boolean;
  /** The percents of the key's budgets whose crossing alerts (`Budget.costAlertThresholds`). Default: the deployment's. */
  costAlertThresholds?: number[];
}

const RATE_LIMIT_NAMES = ['requestsPerMinute', 'tokensPerMinute', 'tokensPerDay'] as const;
const LIMIT_NAMES = [...RATE_LIMIT_NAMES, 'costPerDay', 'costPerMonth', 'costSoft', 'costAlertThresholds'] as const;

const usd = budgetUsd();

/**
 * `ModelLimits` as a settings schema: each field optional, a positive integer (the budgets a
 * positive number of USD); unknown fields
 * refused. For options and configuration files (the reference server's `modelLimits`).
 * @example const defaults = modelLimitsSchema.parse(config.modelLimits ?? {})
 */
export const modelLimitsSchema = settingsObject({
  requestsPerMinute: positiveInteger.optional(),
  tokensPerMinute: positiveInteger.optional(),
  tokensPerDay: positiveInteger.optional(),
  costPerDay: usd.optional(),
  costPerMonth: usd.optional(),
  costSoft: z.boolean({ error: 'must be true or false' }).optional(),
  costAlertThresholds: alertThresholds().optional(),
  // Fields given as undefined are left out, as stores keep them.
}).transform((limits): ModelLimits => Object.fromEntries(Object.entries(limits).filter(([, value]) => value !== undefined)));

/**
 * `limits` as `ModelLimits`, or a `TypeError` naming the first field that is unknown or not a
 * positive integer. For configuration and key creation: check once, at start-up.
 * @example const defaults = checkModelLimits(JSON.parse(text).modelLimits ?? {}, 'modelLimits')
 */
export function checkModelLimits(limits: unknown, where = 'model limits'): ModelLimits {
  return parseOptions(modelLimitsSchema, limits, where);
}

/** True when `limits` limits anything, rates or budgets, or says how its budgets alert: what a key store keeps. */
export function hasModelLimits(limits: ModelLimits): boolean {
  return LIMIT_NAMES.some((name) => limits[name] !== undefined);
}

/** True when `limits` has a limit on requests or tokens: without one a ModelLimiter answers without counting. */
export function hasRateLimits(limits: ModelLimits): boolean {
  return RATE_LIMIT_NAMES.some((name) => limits[name] !== undefined);
}

/** True when `limits` has a token limit: only then are a key's tokens counted. */
export function hasTokenLimits(limits: ModelLimits): boolean {
  return limits.tokensPerMinute !== undefined || limits.tokensPerDay !== undefined;
}

/** One dimension of a decision, as rate-limit headers report it. */
export interface LimitWindow {
  /** The window the figures are for. */
  per: 'minute' | 'day';
  limit: number;
  /** What is left in the window after this call (requests) or before it (tokens); never negative. */
  remaining: number;
  /** Unix ms at which the window ends and its count starts again from zero. */
  resetAt: number;
}

/** What a limiter answers for one call. */
export interface ModelLimitDecision {
  allowed: boolean;
  /** Unix ms the decision was made at (the limiter's clock). */
  at: number;
  /**
   * Set when refused: the limit that keeps the call out longest (requests when both end with
   * the same minute).
   */
  refusedBy?: 'requests' | 'tokens';
  /** Set when refused: whole seconds until the limit that refused has a new window, at least 1. */
  retryAfterSeconds?: number;
  /** Set when the limits have `requestsPerMinute`. */
  requests?: LimitWindow;
  /**
   * Set when the limits have a token limit: the window with fewer tokens left (on a tie, the one
   * that ends later), the one that refused when tokens refuse.
   */
  tokens?: LimitWindow;
}

/** A key's counters in the current windows, before the call being decided. */
export interface ModelUsage {
  requestsThisMinute: number;
  tokensThisMinute: number;
  tokensToday: number;
}

/**
 * Whether a call passes, from the key's counters before it. The one rule of every ModelLimiter:
 * a call passes when the minute has room for one more request and no token window is at or over
 * its limit; a passing call counts one request, a refused one nothing.
 */
export function decide(limits: ModelLimits, usage: ModelUsage, now: number): ModelLimitDecision {
  const windows = clockWindows(now);
  const { requestsPerMinute: rpm, tokensPerMinute: tpm, tokensPerDay: tpd } = limits;
  const full = (limit: number | undefined, used: number) => limit !== undefined && used >= limit;
  const refusals: Array<{ by: 'requests' | 'tokens'; window: ClockWindow }> = [];
  if (full(rpm, usage.requestsThisMinute)) refusals.push({ by: 'requests', window: windows.minute });
  if (full(tpm, usage.tokensThisMinute)) refusals.push({ by: 'tokens', window: windows.minute });
  if (full(tpd, usage.tokensToday)) refusals.push({ by: 'tokens', window: windows.day });
  const allowed = refusals.length === 0;
  const decision: ModelLimitDecision = { allowed, at: now };
  const window = (per: LimitWindow['per'], limit: number, used: number): LimitWindow => ({
    per,
    limit,
    remaining: Math.max(0, limit - used),
    resetAt: windows[per].endsAt,
  });
  if (rpm !== undefined) decision.requests = window('minute', rpm, usage.requestsThisMinute + (allowed ? 1 : 0));
  const tokenWindows = [
    ...(tpm === undefined ? [] : [window('minute', tpm, usage.tokensThisMinute)]),
    ...(tpd === undefined ? [] : [window('day', tpd, usage.tokensToday)]),
  ];
  const tightest = tokenWindows.sort((a, b) => a.remaining - b.remaining || b.resetAt - a.resetAt)[0];
  if (tightest) decision.tokens = tightest;
  // The first refusal that ends last: the day before the minute, requests before tokens on a tie.
  const longest = refusals.reduce<(typeof refusals)[number] | undefined>(
    (found, refusal) => (found === undefined || refusal.window.endsAt > found.window.endsAt ? refusal : found),
    undefined,
  );
  if (longest) {
    decision.refusedBy = longest.by;
    decision.retryAfterSeconds = secondsUntil(longest.window.endsAt, now);
  }
  return decision;
}

/** Throws for a token count that cannot be one: a bug in the caller, not a client error. */
export function assertTokenCount(tokens: number): void {
  if (!Number.isSafeInteger(tokens) || tokens < 0) {
    throw new TypeError(`koa-model-gateway: addTokens() needs a non-negative integer token count, got ${tokens}`);
  }
}
