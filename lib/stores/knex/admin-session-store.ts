import type { Knex } from 'knex';
import { sessionMatchFields, type AdminSession, type AdminSessionStore, type SessionMatch } from '../../admin/admin-session-store.js';
import { storeTimeoutMs, withinTimeout, type KnexStoreOptions } from './store-options.js';
import { wholeSeconds } from './whole-times.js';

const TABLE = 'kmg_admin_sessions';

interface SessionRow {
  hash: string;
  token_id: string | null;
  user_id: string | null;
  csrf_token: string;
  created_at: number | string;
  expires_at: number | string;
  last_seen_at: number | string | null;
  oidc_sid: string | null;
}

/**
 * AdminSessionStore on Knex (PostgreSQL or SQLite): sessions outlive a restart and are shared
 * by every server process. Run `migrate(knex)` first. Every call fails within `timeoutMs`
 * (options: `KnexStoreOptions`; `preparedReads` is not used).
 * @example adminSessions({ tokens, sessions: new KnexAdminSessionStore(knex) })
 */
export class KnexAdminSessionStore implements AdminSessionStore {
  readonly #knex: Knex;
  readonly #timeoutMs: number;

  constructor(knex: Knex, options: KnexStoreOptions = {}) {
    this.#knex = knex;
    this.#timeoutMs = storeTimeoutMs(options);
  }

  async create(session: AdminSession): Promise<void> {
    const row = {
      hash: session.hash,
      token_id: session.tokenId,
      user_id: session.userId,
      csrf_token: session.csrfToken,
      created_at: session.createdAt,
      expires_at: session.expiresAt,
      last_seen_at: session.lastSeenAt,
      oidc_sid: session.oidcSid ?? null,
    };
    await withinTimeout(this.#timeoutMs, async () => this.#knex<SessionRow>(TABLE).insert(row));
  }

  async get(hash: string, nowSeconds: number): Promise<AdminSession | undefined> {
    const row = await withinTimeout(this.#timeoutMs, async () =>
      this.#knex<SessionRow>(TABLE).where({ hash }).where('expires_at', '>', wholeSeconds(nowSeconds)).first(),
    );
    if (!row) return undefined;
    return {
      hash: row.hash,
      tokenId: row.token_id,
      userId: row.user_id,
      csrfToken: row.csrf_token,
      createdAt: Number(row.created_at),
      expiresAt: Number(row.expires_at),
      // Sessions opened before last_seen_at existed: seen when they were opened.
      lastSeenAt: Number(row.last_seen_at ?? row.created_at),
      ...(row.oidc_sid !== null && { oidcSid: row.oidc_sid }),
    };
  }

  async touch(hash: string, at: number): Promise<void> {
    await withinTimeout(this.#timeoutMs, async () =>
      this.#knex<SessionRow>(TABLE)
        .where({ hash })
        .update({ last_seen_at: wholeSeconds(at) }),
    );
  }

  async delete(hash: string): Promise<void> {
    await withinTimeout(this.#timeoutMs, async () => this.#knex<SessionRow>(TABLE).where({ hash }).delete());
  }

  async deleteMatching(match: SessionMatch): Promise<number> {
    const { userId, oidcSid } = sessionMatchFields(match);
    return withinTimeout(this.#timeoutMs, async () =>
      this.#knex<SessionRow>(TABLE)
        .where((query) => {
          if (userId !== undefined) void query.where('user_id', userId);
          if (oidcSid !== undefined) void query.where('oidc_sid', oidcSid);
        })
        .delete(),
    );
  }

  async removeExpired(nowSeconds: number): Promise<number> {
    return withinTimeout(this.#timeoutMs, async () => this.#knex<SessionRow>(TABLE).where('expires_at', '<=', wholeSeconds(nowSeconds)).delete());
  }
}
