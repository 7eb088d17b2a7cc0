import type { ApiKeyRecord } from '../auth/key-store.js';
import { keyStatus, type KeyStatus } from '../auth/keys.js';
import type { Scope } from '../auth/scopes.js';

/** A key's own limits as the admin API and the CLI show them: snake_case, each `null` when unset. */
export interface KeyLimitsObject {
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  tokens_per_day: number | null;
  /** Budgets in USD per UTC day and calendar month. */
  cost_per_day: number | null;
  cost_per_month: number | null;
  /** Whether the key's budgets only alert, never refusing a call; `null`: the deployment's default (not soft). */
  cost_soft: boolean | null;
  /** The percents of the key's budgets whose crossing alerts; `null`: the deployment's. */
  cost_alert_thresholds: number[] | null;
}

/** A key as the admin API and the CLI show it (`keyObject()`): the dashboard reads this type. */
export interface KeyObject {
  object: 'api_key';
  id: string;
  account: string;
  status: KeyStatus;
  scopes: Scope[];
  models: string[] | null;
  /** `null` when the key has no limits of its own. */
  limits: KeyLimitsObject | null;
  /** The key's own response caching; `null` when it has none (its models' settings apply). */
  cache: { ttl_seconds: number; per_key: boolean } | null;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  name: string | null;
  /** The secret's last four characters. */
  hint: string | null;
  last_used_at: number | null;
  replaces: { id: string } | null;
  replaced_by: { id: string } | null;
  /** The key's MCP grant: globs over `{server}/{tool}`; `[]` when it has none (no tool). */
  mcp_tools: string[];
}

/** A key as created or rotated: with its secret `key`, shown this once. */
export interface NewKeyObject extends KeyObject {
  key: string;
}

/** A key as rotated: `replaces` gives the old key's expiry too, the end of its grace or sooner. */
export interface RotatedKeyObject extends NewKeyObject {
  replaces: { id: string; expires_at: number | null };
}

/**
 * A key as the admin API and the CLI show it: never its secret, nor its hash. `limits` in
 * snake_case, each `null` when unset, and `limits: null` when the key has none of its own; `name`,
 * `hint` (the secret's last four characters) and `last_used_at` `null` when unknown; `replaces` and
 * `replaced_by` link the keys of a rotation, `{ id }` or `null`.
 * @example ctx.body = keyObject(await keys.get(id), Math.floor(Date.now() / 1000))
 */
export function keyObject(record: ApiKeyRecord, nowSeconds: number): KeyObject {
  const { limits } = record;
  return {
    object: 'api_key',
    id: record.id,
    account: record.account,
    status: keyStatus(record, nowSeconds),
    scopes: record.scopes,
    models: record.models,
    limits:
      limits === undefined
        ? null
        : {
            requests_per_minute: limits.requestsPerMinute ?? null,
            tokens_per_minute: limits.tokensPerMinute ?? null,
            tokens_per_day: limits.tokensPerDay ?? null,
            cost_per_day: limits.costPerDay ?? null,
            cost_per_month: limits.costPerMonth ?? null,
            cost_soft: limits.costSoft ?? null,
            cost_alert_thresholds: limits.costAlertThresholds ?? null,
          },
    cache: record.cache === undefined ? null : { ttl_seconds: record.cache.ttlSeconds, per_key: record.cache.perKey === true },
    created_at: record.createdAt,
    expires_at: record.expiresAt,
    revoked_at: record.revokedAt,
    name: record.name ?? null,
    hint: record.hint ?? null,
    last_used_at: record.lastUsedAt ?? null,
    replaces: record.replaces === undefined ? null : { id: record.replaces },
    replaced_by: record.replacedBy === undefined ? null : { id: record.replacedBy },
    mcp_tools: record.mcpTools ?? [],
  };
}
