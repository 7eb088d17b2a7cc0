import { z } from 'zod';

/** What a budget must be, as every refusal of one says it. */
export const BUDGET_RULE = 'must be a positive number of USD, from 1e-12 (one picodollar) to 1e15';

/**
 * A budget in USD, the one rule of the admin API, the CLI and the configuration file: a finite
 * number of at least one picodollar (the unit spend is counted in: less would be a budget of 0,
 * which refuses every call) and at most 1e15 (the counters' picodollars stay in a 64-bit integer
 * up to 9.2e6 USD per period; larger never refuses). `rule` is the refusal's message.
 * @example budgetUsd().parse(5e0) === 5
 */
export function budgetUsd(rule = BUDGET_RULE) {
  return z.number({ error: rule }).min(1e-12, { error: rule }).max(1e15, { error: rule });
}

// JSON's number syntax, which the admin API and the configuration file read: the CLI reads the same.
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * A budget written as text (a command-line option), in JSON's number syntax (`5`, `49.95`, `5e0`,
 * `-1`), checked by `budgetUsd()`; `undefined` when it is not one.
 * @example parseBudgetUsd('5e0') === 5 && parseBudgetUsd('1e-13') === undefined
 */
export function parseBudgetUsd(text: string): number | undefined {
  if (!JSON_NUMBER.test(text)) return undefined;
  const parsed = budgetUsd().safeParse(Number(text));
  return parsed.success ? parsed.data : undefined;
}
