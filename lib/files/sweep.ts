import type { BlobStore } from './blob-store.js';
import type { FileStore } from './file-store.js';

export interface SweepOptions {
  files: FileStore;
  blobs: BlobStore;
  /** The clock, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
  /**
   * How old a blob without a record must be before it is removed, in seconds: longer than any
   * upload takes between writing its bytes and inserting its record. Default: 3600.
   */
  orphanGraceSeconds?: number;
  /** Records removed, and blobs checked, per store call. Default: 500. */
  batchSize?: number;
}

export interface SweepResult {
  /** Expired files whose record and bytes were removed. */
  expired: number;
  /** Blobs removed because no record points to them. */
  orphans: number;
}

/**
 * Removes expired files (record and bytes) and blobs that no record points to once they are older
 * than the grace period (left by a crash between writing the bytes and inserting the record).
 * Expired files are already invisible to the API; this frees their space. Safe to run in several
 * processes at once: each expired record is removed by one of them, and removing a blob twice is
 * not an error.
 * @example setInterval(() => void sweep({ files, blobs }).catch(log), 60_000)
 */
export async function sweep(options: SweepOptions): Promise<SweepResult> {
  const { files, blobs } = options ?? {};
  if (typeof files?.removeExpired !== 'function') throw new TypeError('koa-model-gateway: sweep() needs a FileStore as `files`');
  if (typeof blobs?.delete !== 'function') throw new TypeError('koa-model-gateway: sweep() needs a BlobStore as `blobs`');
  const orphanGraceSeconds = options.orphanGraceSeconds ?? 3600;
  const batchSize = options.batchSize ?? 500;
  if (!Number.isFinite(orphanGraceSeconds) || orphanGraceSeconds < 0) {
    throw new TypeError('koa-model-gateway: sweep() orphanGraceSeconds must be a number of seconds');
  }
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
    throw new TypeError('koa-model-gateway: sweep() batchSize must be a positive integer');
  }
  const now = Math.floor((options.nowMs ?? Date.now)() / 1000);
  const result: SweepResult = { expired: 0, orphans: 0 };

  for (;;) {
    const removed = await files.removeExpired(now, batchSize);
    await Promise.all(removed.map((file) => blobs.delete(file.id)));
    result.expired += removed.length;
    if (removed.length < batchSize) break;
  }

  const removeOrphans = async (candidates: string[]) => {
    const existing = await files.existing(candidates);
    const orphans = candidates.filter((id) => !existing.has(id));
    await Promise.all(orphans.map((id) => blobs.delete(id)));
    result.orphans += orphans.length;
  };
  let candidates: string[] = [];
  for await (const blob of blobs.list()) {
    if (blob.createdAt > now - orphanGraceSeconds) continue;
    candidates.push(blob.id);
    if (candidates.length < batchSize) continue;
    await removeOrphans(candidates);
    candidates = [];
  }
  if (candidates.length > 0) await removeOrphans(candidates);
  return result;
}
