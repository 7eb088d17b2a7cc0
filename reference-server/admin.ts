import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import {
  adminAuth,
  adminRouter,
  adminSessions,
  auditRouter,
  auditTrail,
  budgetsRouter,
  requestLogRouter,
  type AdminChange,
  type BudgetChange,
} from 'koa-model-gateway/admin';
import type { Deployment } from './deployment.js';

/**
 * The admin API of the reference server: admin tokens or dashboard sessions (`adminAuth`), the
 * keys, accounts, usage and request log routes and the session routes, every change logged with the admin token's id
 * and recorded in the audit log (`auditTrail`; an entry that could not be recorded is logged as an error).
 */
export function adminApi(deployment: Deployment, logger: Logger): { auth: Middleware; audit: Middleware; routers: Router[] } {
  const { keys, files, creationLimiter, usageStore, adminTokens, adminSessions: sessions, audit } = deployment;
  const { keyPrefix, limits, models } = deployment.config.gateway;
  const onChange = (change: AdminChange | BudgetChange, ctx: Context) => logger.info({ requestId: ctx.state.requestId, ...change }, 'admin change');
  return {
    auth: adminAuth({ tokens: adminTokens, sessions }),
    audit: auditTrail({
      store: audit,
      onError: (err, ctx) => logger.error({ err, requestId: ctx.state.requestId, ...ctx.state.audit }, 'audit entry lost'),
    }),
    routers: [
      adminRouter({ keys, files, creationLimiter, usageStore, catalog: models, keyPrefix, limits, onChange, nowMs: deployment.nowMs }),
      adminSessions({ sessions, onChange }),
      budgetsRouter({ accounts: deployment.accountBudgets, usageStore, catalog: deployment.catalog, onChange, nowMs: deployment.nowMs }),
      auditRouter({ store: audit }),
      requestLogRouter({ store: usageStore }),
    ],
  };
}
