import { randomAlphanumeric } from '../random.js';

/** The dashboard's roles, from the most to the least allowed. */
export const ADMIN_ROLES = ['admin', 'operator', 'viewer'] as const;

/**
 * `admin`: everything; `operator`: keys and budgets, no admin tokens, users or settings; `viewer`:
 * read-only (usage, keys without secrets, audit).
 */
export type AdminRole = (typeof ADMIN_ROLES)[number];

/** A person who signed in to the dashboard through the OIDC provider. */
export interface AdminUser {
  /** `usr_` + 24 letters and digits. */
  id: string;
  /** The provider's `iss` and `sub`: who the person is, together. */
  issuer: string;
  subject: string;
  email: string | null;
  name: string | null;
  /** The role an admin assigned in the dashboard; wins over `claimRole`. */
  role: AdminRole | null;
  /** The role the provider's claim gave at the last sign-in. */
  claimRole: AdminRole | null;
  /** A disabled user's sessions are refused, and they cannot sign in. */
  disabled: boolean;
  /** Unix seconds. */
  createdAt: number;
  lastSignInAt: number;
}

/** Who the provider says signed in, and the role its claim gives. */
export type SignedInIdentity = Pick<AdminUser, 'issuer' | 'subject' | 'email' | 'name' | 'claimRole'>;

/** What an admin may change of a user: each field left out stays. */
export interface AdminUserChanges {
  role?: AdminRole | null | undefined;
  disabled?: boolean | undefined;
}

/** The role a user acts with: the one an admin assigned, else the claim's; `null`: refused. */
export const effectiveRole = (user: Pick<AdminUser, 'role' | 'claimRole'>): AdminRole | null => user.role ?? user.claimRole;

/**
 * Where the dashboard's users live. Implementations: memory, Knex (PostgreSQL, SQLite); one
 * contract suite for both (`adminUserStoreContract`).
 */
export interface AdminUserStore {
  /**
   * Records a sign-in at `at` (Unix seconds): the first one creates the user (`issuer` and `subject`
   * are the key), later ones update email, name, claim role and `lastSignInAt`. Returns the user.
   */
  signIn(identity: SignedInIdentity, at: number): Promise<AdminUser>;
  get(id: string): Promise<AdminUser | undefined>;
  /** Every user, in the order of their first sign-in. */
  list(): Promise<AdminUser[]>;
  /** Changes a user; `undefined` when there is none with this id. */
  update(id: string, changes: AdminUserChanges): Promise<AdminUser | undefined>;
}

/** A new user's id: `usr_` + 24 letters and digits. */
export const newAdminUserId = () => `usr_${randomAlphanumeric(24)}`;
