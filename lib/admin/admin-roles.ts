import type { Middleware } from 'koa';
import { ADMIN_API_PATH, verifiedAdmin } from './admin-auth.js';
import { adminErrors } from './admin-errors.js';
import { ADMIN_ROLES, type AdminRole } from './admin-user-store.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

// What an operator may change: keys and accounts (budgets, limits). Under ADMIN_API_PATH.
const OPERATOR_CHANGES = /^\/(?:keys(?:\/|$)|accounts\/[^/]+(?:\/limits)?$)/;

/**
 * The least role a request to the admin API needs, by its method and path: the people (`/users`)
 * are the admin's alone; any role reads and ends its own session; any role reads the rest
 * (`viewer`: usage, the request log and its export, keys without secrets, audit); an operator changes keys and accounts' budgets;
 * every other change, a route added tomorrow's included, is the admin's.
 * @example requiredRole('PATCH', '/admin/v1/keys/key_1') // 'operator'
 */
export function requiredRole(method: string, path: string): AdminRole {
  const route = path.startsWith(ADMIN_API_PATH) ? path.slice(ADMIN_API_PATH.length) : path;
  if (route === '/users' || route.startsWith('/users/')) return 'admin';
  if (route.startsWith('/sessions/')) return 'viewer';
  if (SAFE_METHODS.has(method)) return 'viewer';
  return OPERATOR_CHANGES.test(route) ? 'operator' : 'admin';
}

/** Whether `role` has at least what `needed` gives. */
export const roleAllows = (role: AdminRole, needed: AdminRole) => ADMIN_ROLES.indexOf(role) <= ADMIN_ROLES.indexOf(needed);

/**
 * Refuses a request whose admin (`ctx.state.admin.role`: `admin` for an admin token) lacks the role
 * `requiredRole()` names for it: 403 `role_not_allowed`, whether the route exists or not. Mount it
 * right after `adminAuth()`, before the admin routers: every route is checked where it is served,
 * not only hidden in the dashboard.
 * @example app.use(underPath('/admin/v1', adminRoles()))
 */
export function adminRoles(): Middleware {
  return async function adminRoles(ctx, next) {
    const { role } = verifiedAdmin(ctx);
    if (!roleAllows(role, requiredRole(ctx.method, ctx.path))) throw adminErrors.roleNotAllowed(role);
    return next();
  };
}
