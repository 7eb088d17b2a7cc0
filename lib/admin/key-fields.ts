import { z } from 'zod';
import { ACCOUNT_NAME_RULE, canonicalAccountName } from '../auth/account-name.js';
import { canonicalKeyName, KEY_NAME_RULE } from '../auth/key-name.js';
import type { KeyCache } from '../auth/key-store.js';
import { SCOPES, isScope, type Scope } from '../auth/scopes.js';
import { isMcpToolGlob, MCP_TOOL_GLOB_RULE } from '../mcp/tool-grants.js';
import type { ModelLimits } from '../quota/model-limits.js';
import { positiveInteger } from '../settings/schemas.js';
import { ALERT_THRESHOLDS_RULE, alertThresholds, BUDGET_RULE, budgetUsd } from '../settings/budget-usd.js';
import { adminErrors } from './admin-errors.js';

/** 9999-12-31T23:59:59Z: later times do not survive a round trip through a date. */
export const LATEST_SECONDS = 253_402_300_799;
/** The longest grace a rotation gives the old key: 30 days, as the longest file expiry. */
export const MAX_GRACE_SECONDS = 2_592_000;

const SCOPE_LIST = `must be a non-empty array of scopes (${SCOPES.join(', ')})`;
const MODEL_LIST = 'must be an array of model ids, or null for every model';
const EXPIRY = 'must be a Unix time in seconds, in the future, or null for no expiry';
const LIMITS =
  'must be an object of requests_per_minute, tokens_per_minute, tokens_per_day, cost_per_day, cost_per_month, cost_soft and cost_alert_thresholds, or null';
const CACHE = 'must be an object of ttl_seconds (a positive integer) and per_key (a boolean), or null';
const GRACE = `must be an integer number of seconds from 0 to ${MAX_GRACE_SECONDS}`;

const unique = <T>(values: T[]) => [...new Set(values)];

interface KeyLimitsInput {
  requests_per_minute?: number | null | undefined;
  tokens_per_minute?: number | null | undefined;
  tokens_per_day?: number | null | undefined;
  cost_per_day?: number | null | undefined;
  cost_per_month?: number | null | undefined;
  cost_soft?: boolean | null | undefined;
  cost_alert_thresholds?: number[] | null | undefined;
}

/** The limits as the key record keeps them (camelCase, unset ones absent); `null` when none is set. */
function toKeyLimits(input: KeyLimitsInput | null): ModelLimits | null {
  if (input === null) return null;
  const limits: ModelLimits = {};
  if (input.requests_per_minute != null) limits.requestsPerMinute = input.requests_per_minute;
  if (input.tokens_per_minute != null) limits.tokensPerMinute = input.tokens_per_minute;
  if (input.tokens_per_day != null) limits.tokensPerDay = input.tokens_per_day;
  if (input.cost_per_day != null) limits.costPerDay = input.cost_per_day;
  if (input.cost_per_month != null) limits.costPerMonth = input.cost_per_month;
  if (input.cost_soft != null) limits.costSoft = input.cost_soft;
  if (input.cost_alert_thresholds != null) limits.costAlertThresholds = input.cost_alert_thresholds;
  return Object.keys(limits).length === 0 ? null : limits;
}

/** A budget in USD, as `modelLimitsSchema` and the CLI take it (`budgetUsd()`), or null. */
export const budgetUsdOrNull = budgetUsd(`${BUDGET_RULE}, or null`).nullable();
/** Whether budgets are soft, or null: the default. */
export const costSoftOrNull = z.boolean({ error: 'must be true or false, or null' }).nullable();
/** A budget's alert thresholds (`alertThresholds()`), or null: the deployment's. */
export const alertThresholdsOrNull = alertThresholds(`${ALERT_THRESHOLDS_RULE}, or null`).nullable();

/**
 * An account name, as `canonicalAccountName` makes it (trimmed, NFC) or refuses it: the same rule
 * for a new key's `account`, the key list's and usage's filter and the accounts route.
 */
/** What a key id in a query is, for error messages. */
export const KEY_ID_RULE = 'must be a key id: 1 to 64 letters, digits, _ and -';
/** A key id as a query parameter names one: it never reaches a store otherwise. */
export const keyIdParameter = z.string({ error: KEY_ID_RULE }).regex(/^[\w-]{1,64}$/, { error: KEY_ID_RULE });

export const accountName = z.string({ error: ACCOUNT_NAME_RULE }).transform((input, ctx) => {
  const name = canonicalAccountName(input);
  if (name === undefined) ctx.addIssue({ code: 'custom', message: ACCOUNT_NAME_RULE });
  return name ?? z.NEVER;
});

/** A key's name, as `canonicalKeyName` makes it (trimmed, NFC) or refuses it; `null`: no name. */
const keyName = z
  .string({ error: `${KEY_NAME_RULE}, or null for none` })
  .transform((input, ctx) => {
    const name = canonicalKeyName(input);
    if (name === undefined) ctx.addIssue({ code: 'custom', message: `${KEY_NAME_RULE}, or null for none` });
    return name ?? z.NEVER;
  })
  .nullable();

/** An MCP grant (`mcp_tools`): globs over `{server}/{tool}`, at most 100, without repeats; `[]` grants nothing. */
export const mcpToolGlobs = z
  .array(z.string({ error: MCP_TOOL_GLOB_RULE }), { error: MCP_TOOL_GLOB_RULE })
  .max(100, { error: `${MCP_TOOL_GLOB_RULE}, at most 100` })
  .superRefine((values, ctx) => {
    const invalid = values.find((value) => !isMcpToolGlob(value));
    if (invalid !== undefined)
      ctx.addIssue({ code: 'custom', message: `'${invalid}' ${MCP_TOOL_GLOB_RULE.replace(/^must be an array of globs/, 'is not a glob')}` });
  })
  .transform(unique);

/**
 * The zod schemas of the admin API's request bodies, checking models against `catalog` and
 * expiry against `nowSeconds()` (Unix seconds) at the time of parsing.
 */
export function keyFieldSchemas(catalog: ReadonlySet<string>, nowSeconds: () => number) {
  const scopes = z
    .array(z.string({ error: SCOPE_LIST }), { error: SCOPE_LIST })
    .min(1, { error: SCOPE_LIST })
    .superRefine((values, ctx) => {
      const unknown = values.find((value) => !isScope(value));
      if (unknown !== undefined) ctx.addIssue({ code: 'custom', message: `unknown scope '${unknown}' (scopes: ${SCOPES.join(', ')})` });
    })
    .transform((values) => unique(values as Scope[]));
  const models = z
    .array(z.string({ error: MODEL_LIST }), { error: MODEL_LIST })
    .superRefine((values, ctx) => {
      const unknown = values.find((value) => !catalog.has(value));
      if (unknown !== undefined) ctx.addIssue({ code: 'custom', message: `unknown model '${unknown}'` });
    })
    .transform(unique)
    .nullable();
  const expiresAt = z
    .int({ error: EXPIRY })
    .nullable()
    .refine((value) => value === null || (value > nowSeconds() && value <= LATEST_SECONDS), { error: EXPIRY });
  // null: the deployment's default.
  const limit = positiveInteger.nullable().optional();
  const budget = budgetUsdOrNull.optional();
  const limits = z
    .strictObject(
      {
        requests_per_minute: limit,
        tokens_per_minute: limit,
        tokens_per_day: limit,
        cost_per_day: budget,
        cost_per_month: budget,
        cost_soft: costSoftOrNull.optional(),
        cost_alert_thresholds: alertThresholdsOrNull.optional(),
      },
      { error: LIMITS },
    )
    .nullable()
    .transform(toKeyLimits);
  const cache = z
    .strictObject({ ttl_seconds: positiveInteger, per_key: z.boolean({ error: CACHE }).optional() }, { error: CACHE })
    .nullable()
    .transform((input): KeyCache | null => input && { ttlSeconds: input.ttl_seconds, ...(input.per_key && { perKey: true }) });
  const changes = {
    scopes: scopes.optional(),
    models: models.optional(),
    expires_at: expiresAt.optional(),
    limits: limits.optional(),
    cache: cache.optional(),
    name: keyName.optional(),
    mcp_tools: mcpToolGlobs.optional(),
  };
  return {
    create: z.strictObject({ account: accountName, ...changes }),
    update: z.strictObject(changes),
    rotate: z.strictObject({ grace_seconds: z.int({ error: GRACE }).min(0, { error: GRACE }).max(MAX_GRACE_SECONDS, { error: GRACE }) }),
  };
}

/**
 * `input` parsed by `schema`, or the 400 that names the first field at fault; `field` names
 * `input` itself when it is one field (a query or path parameter) rather than a body.
 * @example const body = parseFields(schemas.create, await readJsonBody(ctx.req, limit))
 */
export function parseFields<S extends z.ZodType>(schema: S, input: unknown, field?: string): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0] as z.core.$ZodIssue;
  const path = [...(field === undefined ? [] : [field]), ...issue.path.map(String)];
  if (issue.code === 'unrecognized_keys') throw adminErrors.unknownField([...path, issue.keys[0]].join('.'));
  // A required field that is missing is an issue on the field, not on the object.
  if (path.length === 0) throw adminErrors.invalidField('body', issue.message);
  throw adminErrors.invalidField(path.join('.'), issue.message);
}
