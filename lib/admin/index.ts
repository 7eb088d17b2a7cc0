export type { AdminTokenRecord, AdminTokenStore, NewAdminToken } from './admin-token-store.js';
export type { AdminSession, AdminSessionStore } from './admin-session-store.js';
export { createAdminToken } from './admin-tokens.js';
export { adminAuth, verifiedAdmin, type AdminAuthOptions, type VerifiedAdmin } from './admin-auth.js';
export { adminRouter, type AccountLimits, type AdminChange, type AdminRouterOptions } from './admin-router.js';
export { adminSessions, type AdminSessionsOptions } from './admin-sessions.js';
export { budgetsRouter, type BudgetChange, type BudgetsRouterOptions } from './budgets-router.js';
export { keyObject } from './key-object.js';
