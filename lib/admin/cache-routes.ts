import type { RouterMiddleware } from '@koa/router';
import { z } from 'zod';
import type { ResponseCache } from '../models/cache/response-cache.js';
import type { AdminApi } from './admin-router.js';
import { accountName, parseFields } from './key-fields.js';

/** The query of `DELETE /cache`: `account` optional, not repeated, nothing else. */
const purgeQuery = z.strictObject({ account: accountName.optional() });

/**
 * `DELETE /cache?account=` → 204: every answer the response cache keeps for the account, or,
 * without one, every answer it keeps. Audited as `cache.purged`.
 */
export function purgeCache(api: AdminApi, cache: Pick<ResponseCache, 'purge'>): RouterMiddleware {
  return async function purgeCache(ctx) {
    const { account } = parseFields(purgeQuery, { ...ctx.query });
    await cache.purge(account);
    api.report(ctx, { action: 'cache.purged', ...(account !== undefined && { account }) });
    ctx.status = 204;
  };
}
