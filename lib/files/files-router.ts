import { createReadStream } from 'node:fs';
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { verifiedKey } from '../auth/api-key.js';
import { requireScope } from '../auth/require-scope.js';
import { StoreUnavailableError, errors } from '../errors/gateway-error.js';
import { dialectOf } from '../errors/request-dialect.js';
import type { CreationLimiter } from '../quota/creation-limiter.js';
import type { BlobStore } from './blob-store.js';
import { sendPdf } from './download.js';
import { isFileId, newFileId } from './file-id.js';
import { DEFAULT_FILE_LIMITS, type FileLimits } from './file-limits.js';
import { fileQuota } from './file-quota.js';
import { anthropicFileShape, openAIFileShape, type FileShape } from './file-shapes.js';
import type { FileRecord, FileStore } from './file-store.js';
import { pdfUpload } from './pdf-upload.js';

export interface FilesRouterOptions {
  /** Where file metadata lives. */
  files: FileStore;
  /** Where file bytes live. */
  blobs: BlobStore;
  /** Default: `DEFAULT_FILE_LIMITS` (api.md section 8). */
  limits?: Partial<FileLimits>;
  /** The creation rates (per minute, per UTC day, bytes per UTC day). Default: none enforced. */
  creationLimiter?: CreationLimiter;
  /** Where uploads are streamed while their request lasts. Default: `os.tmpdir()`. */
  tempDir?: string;
  /** The clock, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
}

function checkLimit(limits: FileLimits, name: keyof FileLimits): void {
  if (!Number.isSafeInteger(limits[name]) || limits[name] < 1) {
    throw new TypeError(`koa-model-gateway: filesRouter limits.${name} must be a positive integer`);
  }
}

/** The `:file_id` of the route, 400 unless it is a well-formed file id. */
function fileIdParam(ctx: Context): string {
  const id = (ctx.params as Record<string, string>).file_id ?? '';
  if (!isFileId(id)) throw errors.invalidFileId();
  return id;
}

/**
 * The five files endpoints of api.md section 4, each behind its scope: upload, list, retrieve,
 * download and delete, in OpenAI's shape or, for requests that speak Anthropic's API (`dialectOf()`:
 * those that carry `anthropic-version`), in Anthropic's (`client.beta.files` of @anthropic-ai/sdk), over the same files. Mount it behind
 * `gatewayErrors()` (Shape B errors for the same requests) and `apiKey()`, and use its
 * `allowedMethods()` so a wrong method is a 405 in the API's error shape.
 * Checks run in decisions.md's order: scope, validation, existence, quotas.
 * @example
 * const files = filesRouter({ files: new MemoryFileStore(), blobs: new MemoryBlobStore(), creationLimiter });
 * app.use(gatewayErrors()).use(apiKey({ store: keys })).use(files.routes()).use(files.allowedMethods());
 */
export function filesRouter(options: FilesRouterOptions): Router {
  const { files, blobs, creationLimiter } = options;
  if (typeof files?.get !== 'function') throw new TypeError('koa-model-gateway: filesRouter() needs a FileStore as `files`');
  if (typeof blobs?.get !== 'function') throw new TypeError('koa-model-gateway: filesRouter() needs a BlobStore as `blobs`');
  const limits: FileLimits = { ...DEFAULT_FILE_LIMITS, ...options.limits };
  for (const name of Object.keys(DEFAULT_FILE_LIMITS) as (keyof FileLimits)[]) checkLimit(limits, name);
  const nowMs = options.nowMs ?? Date.now;
  /** The request's shape, by the dialect `gatewayErrors()` decided (or `requestDialect()`). */
  const shapeOf = (ctx: Context): FileShape => (dialectOf(ctx) === 'anthropic' ? anthropicFileShape : openAIFileShape);
  // Stored times are whole seconds; `now >= expires_at` is the same test on the floor of now.
  const now = () => Math.floor(nowMs() / 1000);
  const stock = { maxFiles: limits.maxFiles, maxBytes: limits.maxStoredBytes };

  /** The caller's live file named by the route, 404 when it is missing, expired or another account's. */
  async function ownFile(ctx: Context): Promise<FileRecord> {
    const record = await files.get(verifiedKey(ctx).account, fileIdParam(ctx), now());
    if (!record) throw errors.fileNotFound();
    return record;
  }

  /** The caller's live files among `ids`, newest first: the others (missing, expired, another account's) are left out. */
  async function namedFiles(account: string, ids: readonly string[]): Promise<{ files: FileRecord[]; hasMore: false }> {
    const at = now();
    const found = await Promise.all(ids.map((id) => files.get(account, id, at)));
    const live = found.filter((record): record is FileRecord => record !== undefined);
    return { files: live.sort((a, b) => (a.id < b.id ? 1 : -1)), hasMore: false };
  }

  const createFile: Middleware = async function createFile(ctx) {
    const upload = ctx.state.upload;
    if (!upload) throw new Error('koa-model-gateway: pdfUpload() must run before createFile');
    const at = nowMs() / 1000;
    const createdAt = Math.floor(at);
    const record: FileRecord = {
      // The id carries the milliseconds too, so files created within one second list in order.
      id: newFileId(at),
      account: verifiedKey(ctx).account,
      filename: upload.filename,
      bytes: upload.bytes,
      createdAt,
      expiresAt: upload.expiresAfterSeconds === null ? null : createdAt + upload.expiresAfterSeconds,
    };
    // Bytes first, then the record: a crash in between leaves an orphan blob for sweep(), never a
    // record without bytes.
    // A move where the store can (the temp file is finished and pdfUpload() tolerates its absence), else a copy.
    await (blobs.putFile ? blobs.putFile(record.id, upload.path) : blobs.put(record.id, createReadStream(upload.path)));
    let created: boolean;
    try {
      created = await files.create(record, stock, createdAt);
    } catch (err) {
      // An unavailable store may have committed before it failed (a timeout during COMMIT): its
      // blob stays, and sweep() removes it as an orphan if no record came of it. Any other failure
      // created nothing; removing its blob is best effort, sweep() again the fallback.
      if (!(err instanceof StoreUnavailableError)) await blobs.delete(record.id).catch(() => undefined);
      throw err;
    }
    if (!created) {
      await blobs.delete(record.id);
      throw errors.storageQuotaExceeded();
    }
    ctx.body = shapeOf(ctx).file(record);
  };

  const upload: Middleware[] = [
    requireScope('files:write'),
    pdfUpload({
      maxFileBytes: limits.maxFileBytes,
      uploadFields: (ctx) => shapeOf(ctx).uploadFields,
      ...(options.tempDir === undefined ? {} : { tempDir: options.tempDir }),
    }),
    ...(creationLimiter ? [fileQuota({ creationLimiter })] : []),
    createFile,
  ];

  // Paths match exactly as api.md writes them: a router that also took `/V1/files` or
  // `/v1/files/` would serve paths that middleware mounted by prefix (authentication) never saw.
  const router = new Router({ sensitive: true, strict: true });
  router.post('/v1/files', ...upload);

  router.get('/v1/files', requireScope('files:read'), async function listFiles(ctx) {
    const { query, answer } = shapeOf(ctx).list(ctx.query);
    const { account } = verifiedKey(ctx);
    const page = 'ids' in query ? await namedFiles(account, query.ids) : await files.list(account, query, now());
    ctx.body = answer(page.files, page.hasMore);
  });

  router.get('/v1/files/:file_id', requireScope('files:read'), async function retrieveFile(ctx) {
    // ctx.response, not ctx's delegating setter: that costs a megamorphic store per request.
    ctx.response.body = shapeOf(ctx).file(await ownFile(ctx));
  });

  router.get('/v1/files/:file_id/content', requireScope('files:read'), async function downloadFile(ctx) {
    const record = await ownFile(ctx);
    const body = await blobs.get(record.id);
    // Deleted or swept between the two reads.
    if (!body) throw errors.fileNotFound();
    sendPdf(ctx, record, body);
  });

  router.delete('/v1/files/:file_id', requireScope('files:delete'), async function deleteFile(ctx) {
    const id = fileIdParam(ctx);
    if (!(await files.delete(verifiedKey(ctx).account, id, now()))) throw errors.fileNotFound();
    // The file is gone once its record is: bytes left behind by a failure here are an orphan
    // blob, which sweep() removes.
    await blobs.delete(id).catch(() => undefined);
    ctx.body = shapeOf(ctx).deleted(id);
  });

  return router;
}
