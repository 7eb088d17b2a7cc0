import type { RouterMiddleware } from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { createApiKey, rotateApiKey } from '../auth/keys.js';
import { SCOPES } from '../auth/scopes.js';
import { readJsonBody } from '../http/json-body.js';
import { adminErrors } from './admin-errors.js';
import { changedValues } from './audit-store.js';
import type { AdminApi } from './admin-router.js';
import { accountName, parseFields } from './key-fields.js';
import { keyMatcher, keySearch } from './key-search.js';
import { keyObject, type NewKeyObject, type RotatedKeyObject } from './key-object.js';

/** Request bodies are a few fields; an allowlist of every model of a large catalog fits. */
const BODY_LIMIT = 65_536;

const ROTATION_REFUSALS = {
  not_found: adminErrors.keyNotFound,
  not_active: adminErrors.keyNotActive,
  replaced: adminErrors.keyAlreadyRotated,
} as const;

const readBody = (ctx: Context) => readJsonBody(ctx.req, BODY_LIMIT);

async function existingKey(api: AdminApi, id: string) {
  const record = await api.keys.get(id);
  if (!record) throw adminErrors.keyNotFound();
  return record;
}

/** `GET /catalog`: the scopes and models a key may be given, and the prefix of keys. */
export function showCatalog(api: AdminApi): RouterMiddleware {
  return function showCatalog(ctx) {
    ctx.body = { object: 'catalog', scopes: SCOPES, models: api.models, key_prefix: api.keyPrefix };
  };
}

/** `POST /keys` → 201, the key with its secret `key`, the only time it is shown. */
export function createKey(api: AdminApi): RouterMiddleware {
  return async function createKey(ctx) {
    const fields = parseFields(api.schemas.create, await readBody(ctx));
    const { key, record } = await createApiKey(api.keys, {
      prefix: api.keyPrefix,
      account: fields.account,
      name: fields.name ?? null,
      scopes: fields.scopes ?? [...SCOPES],
      models: fields.models ?? null,
      expiresAt: fields.expires_at ?? null,
      ...(fields.limits ? { limits: fields.limits } : {}),
      ...(fields.cache ? { cache: fields.cache } : {}),
      ...(fields.mcp_tools === undefined ? {} : { mcpTools: fields.mcp_tools }),
    });
    api.report(ctx, { action: 'key.created', keyId: record.id, account: record.account, fields: Object.keys(fields) });
    ctx.status = 201;
    ctx.body = { ...keyObject(record, api.now()), key } satisfies NewKeyObject;
  };
}

/** The query of `GET /keys`: both parameters optional, none repeated, none unknown, as the other lists'. */
const listQuery = z.strictObject({ account: accountName.optional(), q: keySearch.optional() });

/** `GET /keys?account=&q=`: `q` a prefix of the account, id or name (case-insensitive). */
export function listKeys(api: AdminApi): RouterMiddleware {
  return async function listKeys(ctx) {
    const { account, q } = parseFields(listQuery, { ...ctx.query });
    const filter = account === undefined ? {} : { account };
    const matches = q === undefined ? () => true : keyMatcher(q);
    const at = api.now();
    ctx.body = { object: 'list', data: (await api.keys.list(filter)).filter(matches).map((record) => keyObject(record, at)) };
  };
}

/** `GET /keys/{id}`. */
export function showKey(api: AdminApi): RouterMiddleware {
  return async function showKey(ctx) {
    ctx.body = keyObject(await existingKey(api, ctx.params.id as string), api.now());
  };
}

/** `PATCH /keys/{id}`: `scopes`, `models`, `expires_at`, `limits`, `cache`, `name`, `mcp_tools`; a field left out stays. */
export function updateKey(api: AdminApi): RouterMiddleware {
  return async function updateKey(ctx) {
    const fields = parseFields(api.schemas.update, await readBody(ctx));
    const before = await existingKey(api, ctx.params.id as string);
    const record = await api.keys.update(before.id, {
      ...(fields.scopes === undefined ? {} : { scopes: fields.scopes }),
      ...(fields.models === undefined ? {} : { models: fields.models }),
      ...(fields.expires_at === undefined ? {} : { expiresAt: fields.expires_at }),
      ...(fields.limits === undefined ? {} : { limits: fields.limits }),
      ...(fields.cache === undefined ? {} : { cache: fields.cache }),
      ...(fields.name === undefined ? {} : { name: fields.name }),
      ...(fields.mcp_tools === undefined ? {} : { mcpTools: fields.mcp_tools }),
    });
    if (!record) throw adminErrors.keyNotFound();
    const at = api.now();
    const changes = changedValues(keyObject(before, at), keyObject(record, at), Object.keys(fields));
    api.report(ctx, { action: 'key.updated', keyId: record.id, account: record.account, fields: Object.keys(fields), changes });
    ctx.body = keyObject(record, at);
  };
}

/** `POST /keys/{id}/revoke`. */
export function revokeKey(api: AdminApi): RouterMiddleware {
  return async function revokeKey(ctx) {
    const id = ctx.params.id as string;
    const revocation = await api.keys.revoke(id);
    if (revocation === 'not_found') throw adminErrors.keyNotFound();
    const record = await existingKey(api, id);
    // Revoking again changes nothing: the same answer (a retry is safe), and no second audit entry.
    if (revocation === 'revoked') api.report(ctx, { action: 'key.revoked', keyId: record.id, account: record.account });
    ctx.body = keyObject(record, api.now());
  };
}

/**
 * `POST /keys/{id}/rotate` `{ grace_seconds }` → 201, the new key with its secret. Only an active
 * key never rotated before is: 409 otherwise, so that a retried rotation makes no second key.
 */
export function rotateKey(api: AdminApi): RouterMiddleware {
  return async function rotateKey(ctx) {
    const { grace_seconds: graceSeconds } = parseFields(api.schemas.rotate, await readBody(ctx));
    const at = api.now();
    // One step in the store: a retried or concurrent rotation of the same key makes no second key.
    const result = await rotateApiKey(api.keys, ctx.params.id as string, { prefix: api.keyPrefix, nowSeconds: at, graceSeconds });
    if (result.outcome !== 'rotated') throw ROTATION_REFUSALS[result.outcome]();
    const { key, old, replacement } = result;
    api.report(ctx, { action: 'key.rotated', keyId: old.id, account: old.account, replacementId: replacement.id });
    ctx.status = 201;
    ctx.body = { ...keyObject(replacement, at), key, replaces: { id: old.id, expires_at: old.expiresAt } } satisfies RotatedKeyObject;
  };
}
