import type { Context, Middleware } from 'koa';
import { z } from 'zod';
import { parseOptions, positiveInteger } from '../settings/schemas.js';
import { auditEntry, type AuditActor, type AuditStore } from './audit-store.js';

export interface AuditTrailOptions {
  /** Where the entries are appended. */
  store: AuditStore;
  /**
   * How long appending one entry may hold up the answer, in milliseconds. Default 2000.
   */
  timeoutMs?: number;
  /**
   * Called when an entry could not be recorded in time (the lost action is on `ctx.state.audit`), for the log.
   * An append that was only slow may still land after it.
   * Default: nothing (the answer goes out regardless).
   */
  onError?: (err: unknown, ctx: Context) => void;
  /** The clock, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
}

const trailOptions = z.object({ timeoutMs: positiveInteger.default(2000) });

class AuditTimeoutError extends Error {
  override readonly name = 'AuditTimeoutError';
}

async function within<T>(timeoutMs: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AuditTimeoutError(`koa-model-gateway: the audit entry was not recorded within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Records each admin action in the audit log, in one place: a handler behind it states what it
 * did on `ctx.state.audit` (`{ action, keyId?, account?, tokenId?, replacementId?, userId?, fields?,
 * changes? }`, never a secret), and once the handler answered 2xx (or 3xx: a sign-in through the
 * OIDC provider ends in a redirect) this middleware appends who did it (the
 * admin token on `ctx.state.admin`, with its name, a dashboard session acting for its token; or the
 * person signed in through the OIDC provider, by id and email), when
 * (Unix seconds) and from where (`ctx.ip`). Mount it after `adminAuth()`, before the admin routers.
 *
 * The change is made before it is recorded, and cannot be taken back: an entry that fails or
 * takes longer than `timeoutMs` is given to `onError` and the answer goes out as the handler made
 * it (never a 500 for a change that was made). A failed request (4xx, 5xx) records nothing.
 * @example app.use(auditTrail({ store: new KnexAuditStore(knex), onError: (err) => logger.error({ err }, 'audit entry lost') }))
 */
export function auditTrail(options: AuditTrailOptions): Middleware {
  const { store, onError } = options;
  if (typeof store?.append !== 'function') throw new TypeError('koa-model-gateway: auditTrail() needs an AuditStore as `store`');
  const { timeoutMs } = parseOptions(trailOptions, { timeoutMs: options.timeoutMs }, 'auditTrail()');
  const nowMs = options.nowMs ?? Date.now;

  return async function auditTrail(ctx, next) {
    await next();
    const event = ctx.state.audit;
    const admin = ctx.state.admin;
    if (!event || !admin || ctx.status < 200 || ctx.status >= 400) return;
    try {
      const actor: AuditActor = admin.user
        ? { type: 'user', id: admin.user.id, name: admin.user.email ?? admin.user.name }
        : { type: 'admin_token', id: admin.tokenId ?? '', name: admin.tokenName };
      const at = Math.floor(nowMs() / 1000);
      await within(timeoutMs, store.append(auditEntry(event, { actor, at, address: ctx.ip || null })));
    } catch (err) {
      onError?.(err, ctx);
    }
  };
}
