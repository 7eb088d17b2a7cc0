import type { Middleware } from 'koa';
import { verifiedKey } from '../auth/api-key.js';
import type { CreationLimiter } from '../quota/creation-limiter.js';

export interface FileQuotaOptions {
  /** `MemoryCreationLimiter` for one process, `RedisCreationLimiter` for several. */
  creationLimiter: CreationLimiter;
}

/**
 * Spends the account's creation rates for a validated upload (after `pdfUpload()`, so the size is
 * exact and a rejected upload never spends anything) and gives them back if anything downstream
 * fails: only files that are created count. Refusals are 429 `rate_limit_exceeded` or
 * `ingestion_quota_exceeded` with `retry-after`; an unreachable limiter store is a 503.
 * @example router.post('/v1/files', pdfUpload(), fileQuota({ creationLimiter }), createFile(stores))
 */
export function fileQuota(options: FileQuotaOptions): Middleware {
  const { creationLimiter } = options;
  if (typeof creationLimiter?.reserve !== 'function') throw new TypeError('koa-model-gateway: fileQuota() needs a CreationLimiter as `creationLimiter`');
  return async function fileQuota(ctx, next) {
    const upload = ctx.state.upload;
    if (!upload) throw new Error('koa-model-gateway: pdfUpload() must run before fileQuota()');
    const reservation = await creationLimiter.reserve(verifiedKey(ctx).account, upload.bytes);
    try {
      await next();
    } catch (err) {
      try {
        await reservation.release();
      } catch (releaseError) {
        // The client gets the error that failed the upload; the lost release is reported, and
        // stays counted (the safe direction) until its window ends.
        ctx.app.emit('error', releaseError, ctx);
      }
      throw err;
    }
  };
}
