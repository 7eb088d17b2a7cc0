/**
 * `koa-model-gateway/admin`: the admin API under `/admin/v1` (`adminRouter()`, `budgetsRouter()`,
 * `mcpAdminRouter()`, `auditRouter()`, `usersRouter()`), its authentication by admin tokens,
 * dashboard sessions and the OIDC provider's sign-in (`oidcLogin()`), the roles (`adminRoles()`)
 * and the audit trail; the `AdminTokenStore`, `AdminSessionStore`, `AdminUserStore` and
 * `AuditStore` interfaces.
 */
export type { AdminTokenRecord, AdminTokenStore, NewAdminToken } from './admin-token-store.js';
export type { AdminSession, AdminSessionStore } from './admin-session-store.js';
export {
  ADMIN_ROLES,
  effectiveRole,
  type AdminRole,
  type AdminUser,
  type AdminUserChanges,
  type AdminUserStore,
  type SignedInIdentity,
} from './admin-user-store.js';
export { adminRoles, requiredRole, roleAllows } from './admin-roles.js';
export { oidcLogin, claimRole, issuerUrl, type OidcLoginOptions, type OidcRoleMapping } from './oidc-login.js';
export { usersRouter, userObject, type UsersRouterOptions } from './users-router.js';
export { ADMIN_TOKEN_NAME_RULE, canonicalAdminTokenName, createAdminToken } from './admin-tokens.js';
export { adminAuth, changedBy, verifiedAdmin, type AdminAuthOptions } from './admin-auth.js';
export type { VerifiedAdmin } from '../state.js';
export { adminRouter, type AccountLimits, type AdminChange, type AdminRouterOptions } from './admin-router.js';
export { adminSessions, sessionOpener, type AdminSessionsOptions, type SessionOpener } from './admin-sessions.js';
export { accountBudgetFields, budgetsRouter, type BudgetChange, type BudgetsRouterOptions } from './budgets-router.js';
export { mcpAdminRouter, type McpAdminRouterOptions, type McpGrantChange } from './mcp-router.js';
export { keyObject, type KeyLimitsObject, type KeyObject, type NewKeyObject, type RotatedKeyObject } from './key-object.js';
export {
  auditEntry,
  changedValues,
  type AuditAction,
  type AuditActor,
  type AuditChanges,
  type AuditEntry,
  type AuditEvent,
  type AuditFilter,
  type AuditPage,
  type AuditStore,
  type NewAuditEntry,
} from './audit-store.js';
export { auditTrail, type AuditTrailOptions } from './audit-trail.js';
export { auditRouter, type AuditRouterOptions } from './audit-router.js';
export { requestLogRouter, type RequestLogRouterOptions } from './request-log-router.js';
