import { errors, type GatewayError } from '../errors/gateway-error.js';
import type { LimitWindow, ModelLimitDecision } from './model-limits.js';

/**
 * Whose rate-limit headers to send: `'openai'` (`x-ratelimit-*`, on Chat Completions and other
 * OpenAI-style endpoints) or `'anthropic'` (`anthropic-ratelimit-*`, on Messages).
 */
export type RateLimitHeaderStyle = 'openai' | 'anthropic';

/**
 * A duration as OpenAI writes `x-ratelimit-reset-*` (Go's `time.Duration` text): `12ms`, `1s`,
 * `17.5s`, `6m0s`, `23h47m36.648s`.
 */
export function goDuration(ms: number): string {
  const whole = Math.max(0, Math.ceil(ms));
  if (whole === 0) return '0s';
  if (whole < 1000) return `${whole}ms`;
  const hours = Math.floor(whole / 3_600_000);
  const minutes = Math.floor((whole % 3_600_000) / 60_000);
  const seconds = `${((whole % 60_000) / 1000).toFixed(3).replace(/\.?0+$/, '')}s`;
  if (hours > 0) return `${hours}h${minutes}m${seconds}`;
  if (minutes > 0) return `${minutes}m${seconds}`;
  return seconds;
}

/** RFC 3339 in whole seconds (`2030-01-15T12:01:00Z`), as Anthropic writes `anthropic-ratelimit-*-reset`. */
function rfc3339(ms: number): string {
  return new Date(Math.ceil(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

// The names of the limit, remaining and reset headers, made once.
const HEADER_NAMES: Record<RateLimitHeaderStyle, Record<'requests' | 'tokens', [string, string, string]>> = {
  openai: {
    requests: ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests'],
    tokens: ['x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens'],
  },
  anthropic: {
    requests: ['anthropic-ratelimit-requests-limit', 'anthropic-ratelimit-requests-remaining', 'anthropic-ratelimit-requests-reset'],
    tokens: ['anthropic-ratelimit-tokens-limit', 'anthropic-ratelimit-tokens-remaining', 'anthropic-ratelimit-tokens-reset'],
  },
};

function addWindow(headers: Record<string, string>, style: RateLimitHeaderStyle, name: 'requests' | 'tokens', window: LimitWindow, at: number): void {
  const [limit, remaining, reset] = HEADER_NAMES[style][name];
  headers[limit] = String(window.limit);
  headers[remaining] = String(window.remaining);
  headers[reset] = style === 'openai' ? goDuration(window.resetAt - at) : rfc3339(window.resetAt);
}

/**
 * The rate-limit headers of a decision, for every answer of a limited key, in the style of the
 * endpoint: limit, remaining and reset for requests (per minute) and for tokens (the window with
 * fewer left). Nothing for a dimension without a limit, so an unlimited key gets no headers.
 * @example ctx.set(rateLimitHeaders(await limiter.consume(key.id, limits), 'anthropic'))
 */
export function rateLimitHeaders(decision: ModelLimitDecision, style: RateLimitHeaderStyle): Record<string, string> {
  const headers: Record<string, string> = {};
  if (decision.requests) addWindow(headers, style, 'requests', decision.requests, decision.at);
  if (decision.tokens) addWindow(headers, style, 'tokens', decision.tokens, decision.at);
  return headers;
}

/**
 * The 429 for a refused decision, in the endpoint's style: `rate_limit_error` /
 * `rate_limit_exceeded`, a message naming the limit (requests per minute, tokens per minute or
 * per day), `retry-after` in whole seconds and the rate-limit headers, carried on `err.headers`
 * so that the error formatters keep them (Shape A or B by the formatter in front).
 * @example if (!decision.allowed) throw modelLimitRefusal(decision, 'openai')
 */
export function modelLimitRefusal(decision: ModelLimitDecision, style: RateLimitHeaderStyle): GatewayError {
  const { refusedBy, retryAfterSeconds } = decision;
  if (decision.allowed || refusedBy === undefined || retryAfterSeconds === undefined) {
    throw new TypeError('koa-model-gateway: modelLimitRefusal() needs a refused decision');
  }
  const limit = refusedBy === 'requests' ? 'requests per minute' : decision.tokens?.per === 'day' ? 'tokens per day' : 'tokens per minute';
  return errors.modelRateExceeded(limit, { ...rateLimitHeaders(decision, style), 'retry-after': String(retryAfterSeconds) });
}
