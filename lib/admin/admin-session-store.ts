/** A dashboard session: what a session cookie stands for, kept on the server. */
export interface AdminSession {
  /** SHA-256 (hex) of the cookie's value: the value itself is never stored. */
  hash: string;
  /** The admin token the session was opened with (revoking it ends the session); `null` for a user's session. */
  tokenId: string | null;
  /** The user who signed in through the OIDC provider (disabling them ends the session); `null` for a token's session. */
  userId: string | null;
  /** Sent back in `X-CSRF-Token` on every request of the session that changes something. */
  csrfToken: string;
  /** Unix seconds. */
  createdAt: number;
  expiresAt: number;
  /** When the session was last used, as `touch` recorded it: what an idle timeout counts from. */
  lastSeenAt: number;
  /** The OIDC provider's session it was opened under (the ID token's `sid`): the provider's logout names it. */
  oidcSid?: string;
}

/** Which sessions a logout from the OIDC provider ends: a person's, those of a provider's session, or those of both. */
export type SessionMatch = { userId: string; oidcSid?: string } | { userId?: string; oidcSid: string };

/** The fields of a `SessionMatch`, checked: a match of no field would end every session. */
export function sessionMatchFields(match: SessionMatch): { userId: string | undefined; oidcSid: string | undefined } {
  const { userId, oidcSid } = match;
  if (typeof userId !== 'string' && typeof oidcSid !== 'string') throw new TypeError('koa-model-gateway: deleteMatching() needs a userId or an oidcSid');
  return { userId, oidcSid };
}

/** Where dashboard sessions live. Implementations: memory, Knex (PostgreSQL, SQLite). */
export interface AdminSessionStore {
  create(session: AdminSession): Promise<void>;
  /** The session with this hash, unless it has expired at `nowSeconds` (Unix seconds). */
  get(hash: string, nowSeconds: number): Promise<AdminSession | undefined>;
  /** Records that the session was used at `at` (Unix seconds); nothing happens when there is none. */
  touch(hash: string, at: number): Promise<void>;
  /** Ends the session; nothing happens when there is none. */
  delete(hash: string): Promise<void>;
  /** Ends every session that matches each field `match` gives; returns how many. */
  deleteMatching(match: SessionMatch): Promise<number>;
  /** Removes every session expired at `nowSeconds`; returns how many. */
  removeExpired(nowSeconds: number): Promise<number>;
}
