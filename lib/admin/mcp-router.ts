import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { readJsonBody } from '../http/json-body.js';
import type { McpCallGrouping, McpCallStore } from '../mcp/call-store.js';
import type { McpGrantStore } from '../mcp/grant-store.js';
import { ADMIN_API_PATH, changedBy, verifiedAdmin } from './admin-auth.js';
import { accountName, keyIdParameter, mcpToolGlobs, parseFields } from './key-fields.js';
import { sinceParameter } from './usage-query.js';

/** A change of an account's MCP grant, for the log of every change. */
export interface McpGrantChange {
  action: 'account.mcp_tools_set';
  adminTokenId: string | null;
  userId?: string;
  account: string;
}

export interface McpAdminRouterOptions {
  /** Where accounts' MCP grants are kept. */
  grants: McpGrantStore;
  /** Where the tool calls' usage records are read, for `GET /mcp/usage`. Default: none (no such route). */
  calls?: Pick<McpCallStore, 'summarize'>;
  /** Called after each change is made, for the log; `ctx.state.requestId` names the request. */
  onChange?: (change: McpGrantChange, ctx: Context) => void;
}

const GROUPINGS = ['server', 'tool', 'key'] as const satisfies readonly McpCallGrouping[];
const grantBody = z.strictObject({ mcp_tools: mcpToolGlobs });
const usageQuery = z.strictObject({
  account: accountName.optional(),
  key: keyIdParameter.optional(),
  since: sinceParameter.optional(),
  by: z.enum(GROUPINGS, { error: `must be one of ${GROUPINGS.join(', ')}` }).default('tool'),
});

const grantObject = (account: string, tools: string[]) => ({ object: 'account_mcp_tools' as const, account, mcp_tools: tools });

/**
 * The admin API's routes for MCP, under `/admin/v1`, to mount behind `adminAuth()` beside `adminRouter()`:
 * - `GET /accounts/{account}/mcp_tools`: the account's grant, `{ object: "account_mcp_tools", account, mcp_tools }`;
 * - `PUT /accounts/{account}/mcp_tools` `{ mcp_tools }`: replaces it (`[]`: none, so none of its keys
 *   may use a tool; a key's grant is the intersection with its account's); answers as `GET`;
 * - with `calls`, `GET /mcp/usage?account=&key=&since=&by=server|tool|key` (default `tool`): the tool
 *   calls, `{ object: "mcp_usage", by, data: [{ group, calls, failed, duration_ms, request_bytes, response_bytes }] }`.
 * @example app.use(mcpAdminRouter({ grants: new KnexMcpGrantStore(knex), calls: new KnexMcpCallStore(knex) }).routes())
 */
export function mcpAdminRouter(options: McpAdminRouterOptions): Router {
  const { grants, calls, onChange } = options;
  if (typeof grants?.set !== 'function') throw new TypeError('koa-model-gateway: mcpAdminRouter() needs an McpGrantStore as `grants`');
  if (calls !== undefined && typeof calls.summarize !== 'function') throw new TypeError('koa-model-gateway: mcpAdminRouter() `calls` must be an McpCallStore');
  const router = new Router({ prefix: ADMIN_API_PATH, sensitive: true, strict: true });
  router.get('/accounts/:account/mcp_tools', async (ctx) => {
    const account = parseFields(accountName, ctx.params.account, 'account');
    ctx.body = grantObject(account, await grants.get(account));
  });
  router.put('/accounts/:account/mcp_tools', async (ctx) => {
    const account = parseFields(accountName, ctx.params.account, 'account');
    const { mcp_tools: tools } = parseFields(grantBody, await readJsonBody(ctx.req, 65_536));
    const kept = await grants.set(account, tools);
    ctx.state.audit = { action: 'account.mcp_tools_set', account, fields: ['mcp_tools'] };
    onChange?.({ action: 'account.mcp_tools_set', ...changedBy(verifiedAdmin(ctx)), account }, ctx);
    ctx.body = grantObject(account, kept);
  });
  if (calls) {
    router.get('/mcp/usage', async (ctx) => {
      const query = parseFields(usageQuery, { ...ctx.query });
      const rows = await calls.summarize(
        {
          ...(query.account === undefined ? {} : { account: query.account }),
          ...(query.key === undefined ? {} : { keyId: query.key }),
          ...(query.since === undefined ? {} : { since: query.since * 1000 }),
        },
        query.by,
      );
      ctx.body = {
        object: 'mcp_usage',
        by: query.by,
        data: rows.map((row) => ({
          group: row.group,
          calls: row.calls,
          failed: row.failed,
          duration_ms: row.durationMs,
          request_bytes: row.requestBytes,
          response_bytes: row.responseBytes,
        })),
      };
    });
  }
  return router;
}
