import { newAdminUserId, type AdminUser, type AdminUserChanges, type AdminUserStore, type SignedInIdentity } from '../../admin/admin-user-store.js';

/**
 * AdminUserStore in process memory: users are forgotten with the process.
 * @example oidcLogin({ ..., users: new MemoryAdminUserStore() })
 */
export class MemoryAdminUserStore implements AdminUserStore {
  readonly #byId = new Map<string, AdminUser>();

  async signIn(identity: SignedInIdentity, at: number): Promise<AdminUser> {
    const known = [...this.#byId.values()].find((user) => user.issuer === identity.issuer && user.subject === identity.subject);
    const user: AdminUser = known
      ? { ...known, email: identity.email, name: identity.name, claimRole: identity.claimRole, lastSignInAt: at }
      : { id: newAdminUserId(), ...identity, role: null, disabled: false, createdAt: at, lastSignInAt: at };
    this.#byId.set(user.id, user);
    return { ...user };
  }

  async get(id: string): Promise<AdminUser | undefined> {
    const user = this.#byId.get(id);
    return user && { ...user };
  }

  async list(): Promise<AdminUser[]> {
    return [...this.#byId.values()].map((user) => ({ ...user }));
  }

  async update(id: string, changes: AdminUserChanges): Promise<AdminUser | undefined> {
    const user = this.#byId.get(id);
    if (!user) return undefined;
    const changed = {
      ...user,
      ...(changes.role !== undefined && { role: changes.role }),
      ...(changes.disabled !== undefined && { disabled: changes.disabled }),
    };
    this.#byId.set(id, changed);
    return { ...changed };
  }
}
