import Router from '@koa/router';
import { z } from 'zod';
import { usdOfPico } from '../picodollars.js';
import { USAGE_CURSOR, type UsageRecord, type UsageRecordFilter, type UsageStore } from '../usage/usage-store.js';
import { ADMIN_API_PATH } from './admin-auth.js';
import { accountName, keyIdParameter, parseFields } from './key-fields.js';
import { sinceParameter } from './usage-query.js';

const LIMIT = 'must be an integer from 1 to 100';
const STATUS = 'must be an HTTP status, 100 to 599';
const MODEL = 'must be a model id of 1 to 255 characters';
const CURSOR = 'must be the next_cursor of a previous page';

/** The query of `GET /admin/v1/requests`: every parameter optional, none repeated, none unknown. */
const requestLogQuerySchema = z.strictObject({
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
  limit: z
    .string({ error: LIMIT })
    .regex(/^\d{1,3}$/, { error: LIMIT })
    .transform(Number)
    .refine((limit) => limit >= 1 && limit <= 100, { error: LIMIT })
    .default(20),
  cursor: z.string({ error: CURSOR }).regex(USAGE_CURSOR, { error: CURSOR }).optional(),
});

/** A usage record as the admin API answers it: snake_case, its time in Unix seconds (to the millisecond), its cost in USD. */
export function requestObject(record: UsageRecord) {
  return {
    object: 'request' as const,
    request_id: record.requestId,
    time: record.time / 1000,
    account: record.account,
    key_id: record.keyId,
    endpoint: record.endpoint,
    model: record.model,
    deployment: record.provider,
    upstream_model: record.upstreamModel ?? null,
    status: record.status,
    stream: record.stream,
    attempts: record.attempts ?? 0,
    input_tokens: record.inputTokens,
    output_tokens: record.outputTokens,
    cost_usd: usdOfPico(record.costPicoUsd),
    latency_ms: record.latencyMs,
    upstream_first_byte_ms: record.upstreamFirstByteMs,
  };
}

export interface RequestLogRouterOptions {
  /** Where `usageRecorder()` writes the model calls' records: a store with `page` (`KnexUsageStore`, `MemoryUsageStore`). */
  store: Pick<UsageStore, 'page'>;
}

/**
 * The request log, under `/admin/v1` behind `adminAuth()`: `GET /requests?account=&key=&model=&status=&since=&until=&limit=&cursor=`
 * → `{ object: "list", data, has_more, next_cursor }`, the model calls' usage records newest
 * first, `limit` a page (1 to 100, default 20); `next_cursor` (or `null` on the last page) as
 * `cursor` gives the next, older page, by keyset: as fast on the last page as on the first. The
 * records are kept `USAGE_RETENTION_DAYS` (the reference server's sweep). 400 naming the parameter for a bad one.
 * @example app.use(requestLogRouter({ store: new KnexUsageStore(knex) }).routes())
 */
export function requestLogRouter(options: RequestLogRouterOptions): Router {
  const { store } = options;
  if (typeof store?.page !== 'function') throw new TypeError('koa-model-gateway: requestLogRouter() needs a UsageStore with page() as `store`');
  const router = new Router({ prefix: ADMIN_API_PATH, sensitive: true, strict: true });
  router.get('/requests', async function listRequests(ctx) {
    const query = parseFields(requestLogQuerySchema, { ...ctx.query });
    const filter: UsageRecordFilter = {
      ...(query.account === undefined ? {} : { account: query.account }),
      ...(query.key === undefined ? {} : { keyId: query.key }),
      ...(query.model === undefined ? {} : { model: query.model }),
      ...(query.status === undefined ? {} : { status: query.status }),
      ...(query.since === undefined ? {} : { since: query.since * 1000 }),
      ...(query.until === undefined ? {} : { until: query.until * 1000 }),
    };
    const page = await store.page!(filter, { limit: query.limit, ...(query.cursor === undefined ? {} : { cursor: query.cursor }) });
    ctx.body = { object: 'list', data: page.records.map(requestObject), has_more: page.nextCursor !== null, next_cursor: page.nextCursor };
  });
  return router;
}
