import { z } from 'zod';
import type { TokenUsage } from '../usage/token-usage.js';
import { settingsObject } from '../settings/schemas.js';

/**
 * What one model costs, in USD per million tokens: `input` and `output`, and where the provider
 * bills them apart, `cacheRead` (input read from the prompt cache) and `cacheWrite` (input written
 * to it). A cache price left out is the `input` price. Reasoning tokens are output tokens, as
 * both OpenAI and Anthropic count and bill them.
 * @example const price: ModelPrice = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 }
 */
export interface ModelPrice {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
}

// A price per million tokens, times 10⁶, is picodollars per token.
const PICO_PER_TOKEN_PER_USD_PER_MILLION = 1_000_000;

const PRICE = 'must be a non-negative number of USD per million tokens, to at most 6 decimal places';
const perMillion = z
  .number({ error: PRICE })
  .min(0, { error: PRICE })
  .max(1_000_000, { error: PRICE })
  // Kept exactly as whole picodollars per token: a finer price would be rounded silently.
  .refine((usd) => Math.abs(usd * PICO_PER_TOKEN_PER_USD_PER_MILLION - Math.round(usd * PICO_PER_TOKEN_PER_USD_PER_MILLION)) < 1e-6, { error: PRICE });

/**
 * `ModelPrice` as a settings schema (a catalog model's `price`): `input` and `output` required,
 * the cache prices optional; each at most 6 decimal places, so that it is exact in picodollars.
 * @example const price = modelPriceSchema.parse({ input: 0.4, output: 1.6, cacheRead: 0.1 })
 */
export const modelPriceSchema = settingsObject({
  input: perMillion,
  output: perMillion,
  cacheRead: perMillion.optional(),
  cacheWrite: perMillion.optional(),
}).transform((price): ModelPrice => Object.fromEntries(Object.entries(price).filter(([, value]) => value !== undefined)) as unknown as ModelPrice);

const picoPerToken = (usdPerMillion: number) => Math.round(usdPerMillion * PICO_PER_TOKEN_PER_USD_PER_MILLION);

/** A price as integer picodollars per token, made once per model: what `callCost()` multiplies. */
export interface TokenPrice {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
}

/**
 * `price` in picodollars per token, exact integers; `undefined` (no known price) is all zeros.
 * @example const perToken = tokenPrice({ input: 3, output: 15 }) // { input: 3_000_000, output: 15_000_000, cacheRead: 3_000_000, cacheWrite: 3_000_000 }
 */
export function tokenPrice(price: ModelPrice | undefined): TokenPrice {
  if (price === undefined) return { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
  const input = picoPerToken(price.input);
  return {
    input,
    output: picoPerToken(price.output),
    cacheRead: price.cacheRead === undefined ? input : picoPerToken(price.cacheRead),
    cacheWrite: price.cacheWrite === undefined ? input : picoPerToken(price.cacheWrite),
  };
}

/**
 * The cost of one answer in picodollars, an exact integer, from the upstream's own token counts:
 * the input tokens that were neither read from nor written to the cache at the input price, cache
 * reads and writes at theirs, output (reasoning included) at the output price.
 * @example callCost(tokenPrice({ input: 3, output: 15 }), { inputTokens: 1000, outputTokens: 100 }) // 4_500_000_000 (0.0045 USD)
 */
export function callCost(price: TokenPrice, usage: TokenUsage): number {
  const cacheRead = usage.cacheReadTokens ?? 0;
  const cacheWrite = usage.cacheWriteTokens ?? 0;
  const uncached = Math.max(0, usage.inputTokens - cacheRead - cacheWrite);
  return uncached * price.input + cacheRead * price.cacheRead + cacheWrite * price.cacheWrite + usage.outputTokens * price.output;
}

/** The request fields that bound a call's output tokens, in the three formats. */
const MAX_OUTPUT_FIELDS = ['max_tokens', 'max_output_tokens', 'max_completion_tokens'] as const;

/**
 * The most a call may cost, in picodollars, for its reservation against budgets: every byte of its
 * request body (`bodyBytes`) as one input token at the input price (an upper bound: a token stands
 * for at least one byte of text), plus its maximum output at the output price: the smallest of
 * its `max_tokens`, `max_output_tokens`, `max_completion_tokens` (positive integers), else
 * `defaultOutputTokens`. Attached files count by their bytes in `bodyBytes`.
 * @example maxCallCost(tokenPrice({ input: 3, output: 15 }), { max_tokens: 1000 }, 2000, 4096) // 21_000_000_000 (0.021 USD)
 */
export function maxCallCost(price: TokenPrice, body: Record<string, unknown>, bodyBytes: number, defaultOutputTokens: number): number {
  let outputTokens: number | undefined;
  for (const field of MAX_OUTPUT_FIELDS) {
    const value = body[field];
    if (Number.isSafeInteger(value) && (value as number) > 0 && (outputTokens === undefined || (value as number) < outputTokens))
      outputTokens = value as number;
  }
  // The dearest input price: a call may read from or write to the cache.
  const inputPrice = Math.max(price.input, price.cacheRead, price.cacheWrite);
  return Math.min(Number.MAX_SAFE_INTEGER, bodyBytes * inputPrice + (outputTokens ?? defaultOutputTokens) * price.output);
}
