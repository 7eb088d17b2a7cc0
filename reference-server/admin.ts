import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import {
  adminAuth,
  adminRoles,
  adminRouter,
  adminSessions,
  auditRouter,
  auditTrail,
  budgetsRouter,
  requestLogRouter,
  oidcLogin,
  usersRouter,
  mcpAdminRouter,
  type AdminChange,
  type BudgetChange,
  type McpGrantChange,
} from 'koa-model-gateway/admin';
import type { Deployment } from './deployment.js';

/**
 * The admin API of the reference server: admin tokens, dashboard sessions and, when an OIDC
 * provider is configured, people who sign in through it (`oidcLogin`, whose routes need no
 * credential: `signIn`, mounted before `auth`), each request held to its role (`auth` ends with
 * `adminRoles`); the keys, accounts, usage, request log, users and session routes, every change logged with the
 * admin token's id or the person's and recorded in the audit log (`audit`, mounted first: it
 * records what happens after it; an entry that could not be recorded is logged as an error).
 */
export function adminApi(deployment: Deployment, logger: Logger): { audit: Middleware; signIn: Router | null; auth: Middleware[]; routers: Router[] } {
  const { keys, files, creationLimiter, usageStore, adminTokens, adminSessions: sessions, adminUsers: users, audit } = deployment;
  const { keyPrefix, limits, models } = deployment.config.gateway;
  const { sessionSeconds, idleSeconds, tokenSignIn, oidc } = deployment.config.dashboard;
  const onChange = (change: AdminChange | BudgetChange | McpGrantChange, ctx: Context) =>
    logger.info({ requestId: ctx.state.requestId, ...change }, 'admin change');
  const nowMs = deployment.nowMs;
  return {
    audit: auditTrail({
      store: audit,
      onError: (err, ctx) => logger.error({ err, requestId: ctx.state.requestId, ...ctx.state.audit }, 'audit entry lost'),
    }),
    signIn: oidc && oidcLogin({ ...oidc, users, sessions, ttlSeconds: sessionSeconds, tokenSignIn, onChange, nowMs }),
    auth: [adminAuth({ tokens: adminTokens, sessions, users, idleSeconds, nowMs }), adminRoles()],
    routers: [
      adminRouter({ keys, files, creationLimiter, usageStore, responseCache: deployment.responseCache, catalog: models, keyPrefix, limits, onChange, nowMs }),
      adminSessions({ sessions, ttlSeconds: sessionSeconds, tokenSignIn, onChange, nowMs }),
      budgetsRouter({ accounts: deployment.accountBudgets, usageStore, catalog: deployment.catalog, onChange, nowMs, ledger: deployment.spendLedger, keys }),
      auditRouter({ store: audit }),
      requestLogRouter({ store: usageStore }),
      usersRouter({ users }),
      mcpAdminRouter({ grants: deployment.mcpGrants, calls: deployment.mcpCalls, onChange }),
    ],
  };
}
