import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { readJsonBody } from '../http/json-body.js';
import { ADMIN_API_PATH } from './admin-auth.js';
import { adminErrors } from './admin-errors.js';
import { ADMIN_ROLES, effectiveRole, type AdminUser, type AdminUserStore } from './admin-user-store.js';
import type { AuditChanges } from './audit-store.js';
import { parseFields } from './key-fields.js';

export interface UsersRouterOptions {
  /** The people who signed in through the OIDC provider (`oidcLogin()`). */
  users: AdminUserStore;
}

const userChanges = z.strictObject({
  role: z
    .enum(ADMIN_ROLES, { error: `must be one of ${ADMIN_ROLES.join(', ')}, or null` })
    .nullable()
    .optional(),
  disabled: z.boolean({ error: 'must be true or false' }).optional(),
});

/** A user as the admin API answers it. */
export function userObject(user: AdminUser) {
  return {
    object: 'user' as const,
    id: user.id,
    issuer: user.issuer,
    subject: user.subject,
    email: user.email,
    name: user.name,
    role: effectiveRole(user),
    assigned_role: user.role,
    claim_role: user.claimRole,
    disabled: user.disabled,
    created_at: user.createdAt,
    last_sign_in_at: user.lastSignInAt,
  };
}

/**
 * The dashboard's people, under `/admin/v1` behind `adminAuth()` and `adminRoles()` (the admin's
 * alone):
 * - `GET /users` → `{ object: "list", data }`, in the order of their first sign-in;
 * - `PATCH /users/{id}` `{ role?: "admin" | "operator" | "viewer" | null, disabled?: boolean }` →
 *   the user: `role` assigns a role that wins over the provider's claim (`null` gives the claim's
 *   back), `disabled: true` refuses their sessions from the next request on. Recorded as
 *   `user.updated` with the values before and after.
 * @example app.use(usersRouter({ users: new KnexAdminUserStore(knex) }).routes())
 */
export function usersRouter(options: UsersRouterOptions): Router {
  const { users } = options;
  if (typeof users?.list !== 'function') throw new TypeError('koa-model-gateway: usersRouter() needs an AdminUserStore as `users`');
  const router = new Router({ prefix: ADMIN_API_PATH, sensitive: true, strict: true });

  router.get('/users', async (ctx) => {
    ctx.body = { object: 'list', data: (await users.list()).map(userObject) };
  });

  router.patch('/users/:id', async (ctx: Context) => {
    const id = String(ctx.params.id);
    const changes = parseFields(userChanges, await readJsonBody(ctx.req, 4096));
    const before = await users.get(id);
    if (!before) throw adminErrors.userNotFound();
    const after = await users.update(id, changes);
    if (!after) throw adminErrors.userNotFound();
    const changed: AuditChanges = {};
    if (changes.role !== undefined) changed.role = { from: before.role, to: after.role };
    if (changes.disabled !== undefined) changed.disabled = { from: before.disabled, to: after.disabled };
    ctx.state.audit = { action: 'user.updated', userId: id, fields: Object.keys(changes), changes: changed };
    ctx.body = userObject(after);
  });

  return router;
}
