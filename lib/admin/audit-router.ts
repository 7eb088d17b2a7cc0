import Router from '@koa/router';
import { z } from 'zod';
import { ADMIN_API_PATH } from './admin-auth.js';
import { AUDIT_ACTIONS, AUDIT_CURSOR, type AuditEntry, type AuditStore } from './audit-store.js';
import { accountName, keyIdParameter, parseFields } from './key-fields.js';
import { sinceParameter } from './usage-query.js';

const LIMIT = 'must be an integer from 1 to 100';

/** The query of `GET /admin/v1/audit`: every parameter optional, none repeated, none unknown. */
const auditQuerySchema = z.strictObject({
  since: sinceParameter.optional(),
  action: z.enum(AUDIT_ACTIONS, { error: `must be one of ${AUDIT_ACTIONS.join(', ')}` }).optional(),
  key: keyIdParameter.optional(),
  account: accountName.optional(),
  limit: z
    .string({ error: LIMIT })
    .regex(/^\d{1,3}$/, { error: LIMIT })
    .transform(Number)
    .refine((limit) => limit >= 1 && limit <= 100, { error: LIMIT })
    .default(20),
  cursor: z
    .string({ error: 'must be the next_cursor of a previous page' })
    .regex(AUDIT_CURSOR, { error: 'must be the next_cursor of a previous page' })
    .optional(),
});

/** An entry as the admin API answers it: snake_case, nothing in it but names, ids, a time and an address. */
function auditEntryObject(entry: AuditEntry) {
  return {
    object: 'audit_entry' as const,
    id: entry.id,
    at: entry.at,
    action: entry.action,
    actor: entry.actor,
    key_id: entry.keyId,
    account: entry.account,
    admin_token_id: entry.tokenId,
    replacement_key_id: entry.replacementId,
    user_id: entry.userId,
    fields: entry.fields,
    changes: entry.changes,
    address: entry.address,
  };
}

export interface AuditRouterOptions {
  /** Where `auditTrail()` and the command line record the admin actions. */
  store: Pick<AuditStore, 'list'>;
}

/**
 * The audit log, under `/admin/v1` behind `adminAuth()`: `GET /audit?since=&action=&key=&account=&limit=&cursor=`
 * → `{ object: "list", data, has_more, next_cursor }`, newest first, `limit` entries a page
 * (1 to 100, default 20); `next_cursor` (or `null` on the last page) as `cursor` gives the next,
 * older page. `key` finds the entries about a key, its rotation into it included. 400 naming the
 * parameter for a bad one.
 * @example app.use(auditRouter({ store: new KnexAuditStore(knex) }).routes())
 */
export function auditRouter(options: AuditRouterOptions): Router {
  const { store } = options;
  if (typeof store?.list !== 'function') throw new TypeError('koa-model-gateway: auditRouter() needs an AuditStore as `store`');
  const router = new Router({ prefix: ADMIN_API_PATH, sensitive: true, strict: true });
  router.get('/audit', async (ctx) => {
    const query = parseFields(auditQuerySchema, { ...ctx.query });
    const page = await store.list(
      {
        ...(query.since === undefined ? {} : { since: query.since }),
        ...(query.action === undefined ? {} : { action: query.action }),
        ...(query.key === undefined ? {} : { keyId: query.key }),
        ...(query.account === undefined ? {} : { account: query.account }),
      },
      { limit: query.limit, ...(query.cursor === undefined ? {} : { cursor: query.cursor }) },
    );
    ctx.body = { object: 'list', data: page.entries.map(auditEntryObject), has_more: page.nextCursor !== null, next_cursor: page.nextCursor };
  });
  return router;
}
