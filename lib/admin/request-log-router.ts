import { Readable } from 'node:stream';
import Router from '@koa/router';
import { z } from 'zod';
import { exportUsage, exportUsageRollups, USAGE_EXPORT_FORMATS, usageRecordFields } from '../usage/usage-export.js';
import { USAGE_CURSOR, type UsageRecord, type UsageRecordFilter, type UsageStore } from '../usage/usage-store.js';
import { ADMIN_API_PATH } from './admin-auth.js';
import { accountName, keyIdParameter, parseFields } from './key-fields.js';
import { sinceParameter } from './usage-query.js';

const LIMIT = 'must be an integer from 1 to 100';
const STATUS = 'must be an HTTP status, 100 to 599';
const MODEL = 'must be a model id of 1 to 255 characters';
const CURSOR = 'must be the next_cursor of a previous page';

const FORMAT = `must be one of ${USAGE_EXPORT_FORMATS.join(', ')}`;

/** What both routes filter by. */
const filterFields = {
  account: accountName.optional(),
  key: keyIdParameter.optional(),
  model: z.string({ error: MODEL }).min(1, { error: MODEL }).max(255, { error: MODEL }).optional(),
  status: z
    .string({ error: STATUS })
    .regex(/^[1-5]\d\d$/, { error: STATUS })
    .transform(Number)
    .optional(),
  since: sinceParameter.optional(),
  until: sinceParameter.optional(),
};

/** The query of `GET /admin/v1/requests`: every parameter optional, none repeated, none unknown. */
const requestLogQuerySchema = z.strictObject({
  ...filterFields,
  limit: z
    .string({ error: LIMIT })
    .regex(/^\d{1,3}$/, { error: LIMIT })
    .transform(Number)
    .refine((limit) => limit >= 1 && limit <= 100, { error: LIMIT })
    .default(20),
  cursor: z.string({ error: CURSOR }).regex(USAGE_CURSOR, { error: CURSOR }).optional(),
});

/** The query of `GET /admin/v1/requests/export`: a period (`since` required) and a format. */
const exportQuerySchema = z
  .strictObject({
    ...filterFields,
    since: sinceParameter,
    format: z.enum(USAGE_EXPORT_FORMATS, { error: FORMAT }),
    rollups: z.enum(['hour', 'day'], { error: 'must be hour or day' }).optional(),
  })
  .refine((query) => query.rollups === undefined || (query.model === undefined && query.status === undefined), {
    error: 'must be left out with model or status: the roll-ups are filtered by account, key and time only',
    path: ['rollups'],
  });

function recordFilter(query: z.output<z.ZodObject<typeof filterFields>>): UsageRecordFilter {
  return {
    ...(query.account === undefined ? {} : { account: query.account }),
    ...(query.key === undefined ? {} : { keyId: query.key }),
    ...(query.model === undefined ? {} : { model: query.model }),
    ...(query.status === undefined ? {} : { status: query.status }),
    ...(query.since === undefined ? {} : { since: query.since * 1000 }),
    ...(query.until === undefined ? {} : { until: query.until * 1000 }),
  };
}

/** A usage record as the admin API answers it: snake_case, its time in Unix seconds (to the millisecond), its cost in USD. */
export const requestObject = (record: UsageRecord) => ({ object: 'request' as const, ...usageRecordFields(record), time: record.time / 1000 });

export interface RequestLogRouterOptions {
  /** Where `usageRecorder()` writes the model calls' records: a store with `page` (`KnexUsageStore`, `MemoryUsageStore`). */
  store: Pick<UsageStore, 'page' | 'rollups'>;
}

/**
 * The request log, under `/admin/v1` behind `adminAuth()`: `GET /requests?account=&key=&model=&status=&since=&until=&limit=&cursor=`
 * → `{ object: "list", data, has_more, next_cursor }`, the model calls' usage records newest
 * first, `limit` a page (1 to 100, default 20); `next_cursor` (or `null` on the last page) as
 * `cursor` gives the next, older page, by keyset: as fast on the last page as on the first. The
 * records are kept `USAGE_RETENTION_DAYS` (the reference server's sweep). `GET /requests/export?since=&until=&format=csv|jsonl`
 * (and the same filters) streams every record of the period, CSV or JSON Lines (`exportUsage()`); with
 * `rollups=hour|day`, the roll-ups of the period instead (`exportUsageRollups()`).
 * 400 naming the parameter for a bad one.
 * @example app.use(requestLogRouter({ store: new KnexUsageStore(knex) }).routes())
 */
export function requestLogRouter(options: RequestLogRouterOptions): Router {
  const { store } = options;
  if (typeof store?.page !== 'function') throw new TypeError('koa-model-gateway: requestLogRouter() needs a UsageStore with page() as `store`');
  const router = new Router({ prefix: ADMIN_API_PATH, sensitive: true, strict: true });
  router.get('/requests', async function listRequests(ctx) {
    const query = parseFields(requestLogQuerySchema, { ...ctx.query });
    const page = await store.page!(recordFilter(query), { limit: query.limit, ...(query.cursor === undefined ? {} : { cursor: query.cursor }) });
    ctx.body = { object: 'list', data: page.records.map(requestObject), has_more: page.nextCursor !== null, next_cursor: page.nextCursor };
  });
  router.get('/requests/export', async function exportRequests(ctx) {
    const query = parseFields(exportQuerySchema, { ...ctx.query });
    const filter = recordFilter(query);
    const lines = query.rollups === undefined ? exportUsage(store, filter, query.format) : exportUsageRollups(store, query.rollups, filter, query.format);
    // The first page read before the answer starts: a store that is down is a 503, not an empty export.
    const first = await lines.next();
    ctx.type = query.format === 'csv' ? 'text/csv' : 'application/jsonl';
    ctx.attachment(`usage${query.rollups === undefined ? '' : `-${query.rollups}`}.${query.format}`);
    ctx.body = Readable.from(
      (async function* () {
        if (first.done !== true) yield `${first.value}\n`;
        for await (const line of lines) yield `${line}\n`;
      })(),
    );
  });
  return router;
}
