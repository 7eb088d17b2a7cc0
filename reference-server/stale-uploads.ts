import { opendir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';

/** Far longer than any upload takes: whatever is older was left by a process that died mid-upload. */
const STALE_SECONDS = 86_400;

/**
 * Removes the temp files that a process killed mid-upload left in the uploads directory (a live
 * process removes its own). Safe beside running servers: their uploads are younger than a day.
 * Returns how many were removed.
 */
export async function removeStaleUploads(dir: string, nowMs = Date.now()): Promise<number> {
  let removed = 0;
  for await (const entry of await opendir(dir)) {
    if (!entry.isFile()) continue;
    const path = join(dir, entry.name);
    const info = await stat(path).catch(() => undefined);
    if (info && info.mtimeMs < nowMs - STALE_SECONDS * 1000) {
      await rm(path, { force: true });
      removed += 1;
    }
  }
  return removed;
}
