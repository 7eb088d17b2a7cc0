import type { Knex } from 'knex';
import {
  newAdminUserId,
  type AdminRole,
  type AdminUser,
  type AdminUserChanges,
  type AdminUserStore,
  type SignedInIdentity,
} from '../../admin/admin-user-store.js';
import { storeTimeoutMs, withinTimeout, type KnexStoreOptions } from './store-options.js';

const TABLE = 'kmg_admin_users';

interface UserRow {
  id: string;
  issuer: string;
  subject: string;
  email: string | null;
  name: string | null;
  role: string | null;
  claim_role: string | null;
  disabled: boolean | number;
  created_at: number | string;
  last_sign_in_at: number | string;
}

// pg returns bigint columns as strings, SQLite booleans as 0 and 1.
const toUser = (row: UserRow): AdminUser => ({
  id: row.id,
  issuer: row.issuer,
  subject: row.subject,
  email: row.email,
  name: row.name,
  role: row.role as AdminRole | null,
  claimRole: row.claim_role as AdminRole | null,
  disabled: Boolean(row.disabled),
  createdAt: Number(row.created_at),
  lastSignInAt: Number(row.last_sign_in_at),
});

/**
 * AdminUserStore on Knex (PostgreSQL or SQLite): the dashboard's users, shared by every server
 * process. Run `migrate(knex)` first. Every call fails within `timeoutMs` (options:
 * `KnexStoreOptions`; `preparedReads` is not used).
 * @example oidcLogin({ ..., users: new KnexAdminUserStore(knex) })
 */
export class KnexAdminUserStore implements AdminUserStore {
  readonly #knex: Knex;
  readonly #timeoutMs: number;

  constructor(knex: Knex, options: KnexStoreOptions = {}) {
    this.#knex = knex;
    this.#timeoutMs = storeTimeoutMs(options);
  }

  async signIn(identity: SignedInIdentity, at: number): Promise<AdminUser> {
    const seen = { email: identity.email, name: identity.name, claim_role: identity.claimRole, last_sign_in_at: at };
    const row = { id: newAdminUserId(), issuer: identity.issuer, subject: identity.subject, role: null, disabled: false, created_at: at, ...seen };
    return withinTimeout(this.#timeoutMs, async () => {
      // One statement: two first sign-ins at once make one user.
      await this.#knex<UserRow>(TABLE).insert(row).onConflict(['issuer', 'subject']).merge(seen);
      return toUser(await this.#knex<UserRow>(TABLE).where({ issuer: identity.issuer, subject: identity.subject }).first().then(required));
    });
  }

  async get(id: string): Promise<AdminUser | undefined> {
    const row = await withinTimeout(this.#timeoutMs, async () => this.#knex<UserRow>(TABLE).where({ id }).first());
    return row && toUser(row);
  }

  async list(): Promise<AdminUser[]> {
    return (await withinTimeout(this.#timeoutMs, async () => this.#knex<UserRow>(TABLE).orderBy('seq'))).map(toUser);
  }

  async update(id: string, changes: AdminUserChanges): Promise<AdminUser | undefined> {
    const set = {
      ...(changes.role !== undefined && { role: changes.role }),
      ...(changes.disabled !== undefined && { disabled: changes.disabled }),
    };
    return withinTimeout(this.#timeoutMs, async () => {
      if (Object.keys(set).length > 0) await this.#knex<UserRow>(TABLE).where({ id }).update(set);
      const row = await this.#knex<UserRow>(TABLE).where({ id }).first();
      return row && toUser(row);
    });
  }
}

function required(row: UserRow | undefined): UserRow {
  if (!row) throw new Error('koa-model-gateway: the user just signed in is missing');
  return row;
}
