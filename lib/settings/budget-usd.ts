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

/** What a budget's alert thresholds must be, as every refusal of them says it. */
export const ALERT_THRESHOLDS_RULE = 'must be 1 to 10 whole percents of the budget, each from 1 to 1000';

/**
 * A budget's alert thresholds (`Budget.costAlertThresholds`): 1 to 10 whole percents from 1 to
 * 1000, the one rule of the admin API, the CLI and the configuration file; repeats dropped, in
 * ascending order.
 * @example alertThresholds().parse([100, 50, 50]) // [50, 100]
 */
export function alertThresholds(rule = ALERT_THRESHOLDS_RULE) {
  const percent = z.int({ error: rule }).min(1, { error: rule }).max(1000, { error: rule });
  return z
    .array(percent, { error: rule })
    .min(1, { error: rule })
    .max(10, { error: rule })
    .transform((percents) => [...new Set(percents)].sort((a, b) => a - b));
}

/**
 * Alert thresholds written as text (a command-line option): whole percents separated by commas
 * (`50,80,100`), checked by `alertThresholds()`; `undefined` when they are not.
 * @example parseAlertThresholds('80,50') // [50, 80]
 */
export function parseAlertThresholds(text: string): number[] | undefined {
  const parts = text.split(',').map((part) => part.trim());
  if (!parts.every((part) => /^\d{1,4}$/.test(part))) return undefined;
  const parsed = alertThresholds().safeParse(parts.map(Number));
  return parsed.success ? parsed.data : undefined;
}
