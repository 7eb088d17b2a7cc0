import { sessionMatchFields, type AdminSession, type AdminSessionStore, type SessionMatch } from '../../admin/admin-session-store.js';

/**
 * AdminSessionStore in process memory: sessions end with the process.
 * @example adminSessions({ tokens, sessions: new MemoryAdminSessionStore() })
 */
export class MemoryAdminSessionStore implements AdminSessionStore {
  readonly #byHash = new Map<string, AdminSession>();

  async create(session: AdminSession): Promise<void> {
    if (this.#byHash.has(session.hash)) throw new Error('koa-model-gateway: a session with this hash exists');
    this.#byHash.set(session.hash, { ...session });
  }

  async get(hash: string, nowSeconds: number): Promise<AdminSession | undefined> {
    const session = this.#byHash.get(hash);
    return session && nowSeconds < session.expiresAt ? { ...session } : undefined;
  }

  async touch(hash: string, at: number): Promise<void> {
    const session = this.#byHash.get(hash);
    if (session) session.lastSeenAt = Math.floor(at);
  }

  async delete(hash: string): Promise<void> {
    this.#byHash.delete(hash);
  }

  async deleteMatching(match: SessionMatch): Promise<number> {
    const { userId, oidcSid } = sessionMatchFields(match);
    let removed = 0;
    for (const [hash, session] of this.#byHash) {
      if ((userId === undefined || session.userId === userId) && (oidcSid === undefined || session.oidcSid === oidcSid)) {
        removed += Number(this.#byHash.delete(hash));
      }
    }
    return removed;
  }

  async removeExpired(nowSeconds: number): Promise<number> {
    let removed = 0;
    for (const [hash, session] of this.#byHash) {
      if (nowSeconds >= session.expiresAt) removed += Number(this.#byHash.delete(hash));
    }
    return removed;
  }
}
