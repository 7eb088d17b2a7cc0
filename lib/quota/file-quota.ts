import type { Middleware } from 'koa';
import { verifiedKey } from '../auth/api-key.js';
import type { CreationLimiter } from './creation-limiter.js';
import '../files/upload-state.js';

export interface FileQuotaOptions {
  limiter: CreationLimiter;
}

/**
 * Spends the account's creation rates for a validated upload (after `pdfUpload()`, so the size is
 * exact and a rejected upload never spends anything) and gives them back if anything downstream
 * fails: only files that are created count.
 * @example router.post('/v1/files', pdfUpload(), fileQuota({ limiter }), createFile(stores))
 */
export function fileQuota(options: FileQuotaOptions): Middleware {
  const { limiter } = options;
  return async function fileQuota(ctx, next) {
    const upload = ctx.state.upload;
    if (!upload) throw new Error('koa-model-gateway: pdfUpload() must run before fileQuota()');
    const reservation = await limiter.reserve(verifiedKey(ctx).account, upload.bytes);
    try {
      await next();
    } catch (err) {
      await reservation.release();
      throw err;
    }
  };
}
