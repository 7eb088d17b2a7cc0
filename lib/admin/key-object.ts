import type { ApiKeyRecord } from '../auth/key-store.js';
import { keyStatus } from '../auth/keys.js';

/**
 * A key as the admin API and the CLI show it: never its secret, nor its hash. `limits` in
 * snake_case, each `null` when unset, and `limits: null` when the key has none of its own; `name`,
 * `hint` (the secret's last four characters) and `last_used_at` `null` when unknown; `replaces` and
 * `replaced_by` link the keys of a rotation, `{ id }` or `null`.
 * @example ctx.body = keyObject(await keys.get(id), Date.now() / 1000)
 */
export function keyObject(record: ApiKeyRecord, nowSeconds: number) {
  const { limits } = record;
  return {
    object: 'api_key' as const,
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
          },
    created_at: record.createdAt,
    expires_at: record.expiresAt,
    revoked_at: record.revokedAt,
    name: record.name ?? null,
    hint: record.hint ?? null,
    last_used_at: record.lastUsedAt ?? null,
    replaces: record.replaces === undefined ? null : { id: record.replaces },
    replaced_by: record.replacedBy === undefined ? null : { id: record.replacedBy },
  };
}
