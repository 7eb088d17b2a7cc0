/**
 * `koa-model-gateway/admin`: the admin API under `/admin/v1` (`adminRouter()`, `budgetsRouter()`,
 * `auditRouter()`), its authentication by admin tokens and dashboard sessions, and the audit trail;
 * the `AdminTokenStore`, `AdminSessionStore` and `AuditStore` interfaces.
 */
export type { AdminTokenRecord, AdminTokenStore, NewAdminToken } from './admin-token-store.js';
export type { AdminSession, AdminSessionStore } from './admin-session-store.js';
export { ADMIN_TOKEN_NAME_RULE, canonicalAdminTokenName, createAdminToken } from './admin-tokens.js';
export { adminAuth, verifiedAdmin, type AdminAuthOptions } from './admin-auth.js';
export type { VerifiedAdmin } from '../state.js';
export { adminRouter, type AccountLimits, type AdminChange, type AdminRouterOptions } from './admin-router.js';
export { adminSessions, type AdminSessionsOptions } from './admin-sessions.js';
export { budgetsRouter, type BudgetChange, type BudgetsRouterOptions } from './budgets-router.js';
export { keyObject, type KeyLimitsObject, type KeyObject, type NewKeyObject, type RotatedKeyObject } from './key-object.js';
export {
  auditEntry,
  type AuditAction,
  type AuditActor,
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
