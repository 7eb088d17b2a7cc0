import { randomBytes } from 'node:crypto';
import { mkdir, opendir, readFile, readlink, rm, rmdir, stat, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { isUploadTempName } from '../lib/files/multipart-form.js';

/**
 * How often a serving process touches its uploads directory, and how long untouched it must be
 * before any process takes its owner for dead: the one test where the kernel cannot tell (another
 * host, another PID namespace). Far longer than any stall of an event loop.
 */
const HEARTBEAT_MS = 60_000;
const STALE_CLAIM_MS = 5 * 60_000;
/** Temp files left directly in the uploads directory (by a version before the claims) are taken for dead when this old. */
const STALE_LOOSE_FILE_MS = 24 * 3600_000;

/** `claim.<host>.<pid>.<nonce>`: the directory of one serving process. */
const CLAIM_NAME = /^claim\.([0-9a-f]{32}-[0-9]+|unknown)\.([0-9]+)\.[0-9a-f]{16}$/;

/**
 * This kernel boot and PID namespace: two processes that share it see each other's PIDs, so one
 * can ask the kernel whether the other lives. Unknown where /proc is not (not Linux).
 */
async function hostKey(): Promise<string> {
  try {
    const bootId = (await readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim().replaceAll('-', '');
    const namespace = /^pid:\[([0-9]+)\]$/.exec(await readlink('/proc/self/ns/pid'))?.[1];
    return /^[0-9a-f]{32}$/.test(bootId) && namespace !== undefined ? `${bootId}-${namespace}` : 'unknown';
  } catch {
    return 'unknown';
  }
}

/**
 * The state letter of `/proc/<pid>/stat` (after the command name, which may hold spaces and
 * parentheses), or `undefined` when it cannot be read.
 */
async function processState(pid: number): Promise<string | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0];
  } catch {
    return undefined;
  }
}

async function processLives(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it lives, as another user.
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
  // A process killed but not yet reaped by its parent (a zombie, Z, or X as it goes) still holds
  // its PID, and is dead all the same.
  const state = await processState(pid);
  return state !== 'Z' && state !== 'X';
}

/** The uploads directory of this process while it serves. */
export interface UploadsClaim {
  /** Where this process streams its uploads (`pdfUpload`'s `tempDir`). */
  dir: string;
  /** Stops the heartbeat and removes the directory with the temp files left in it. */
  release(): Promise<void>;
}

/**
 * Makes this process's own directory in `uploadsDir`, named after its host (kernel boot and PID
 * namespace) and PID, and touches it every minute for as long as it serves. Any process sharing
 * `uploadsDir` can then tell a claim whose owner died (`removeStaleUploads`): at once on the same
 * host, after five minutes without a touch anywhere.
 * @example const uploads = await claimUploadsDir(config.uploadsDir); pdfUpload({ tempDir: uploads.dir })
 */
export async function claimUploadsDir(uploadsDir: string): Promise<UploadsClaim> {
  const dir = join(uploadsDir, `claim.${await hostKey()}.${process.pid}.${randomBytes(8).toString('hex')}`);
  await mkdir(dir, { recursive: true });
  const heartbeat = setInterval(() => {
    const now = new Date();
    utimes(dir, now, now).catch(() => undefined);
  }, HEARTBEAT_MS).unref();
  return {
    dir,
    async release() {
      clearInterval(heartbeat);
      await removeTempFiles(dir);
      await rmdir(dir).catch(() => undefined);
    },
  };
}

/** Removes the upload temp files directly in `dir` (nothing else), with a test on each; returns how many. */
async function removeTempFiles(dir: string, isStale: (path: string) => Promise<boolean> = async () => true): Promise<number> {
  let removed = 0;
  for await (const entry of await opendir(dir)) {
    const path = join(dir, entry.name);
    if (!entry.isFile() || !isUploadTempName(entry.name) || !(await isStale(path))) continue;
    await rm(path, { force: true });
    removed += 1;
  }
  return removed;
}

/**
 * Removes what uploads left behind in `uploadsDir` when their process died (a live process
 * removes its own): the claims (`claimUploadsDir`) of dead processes, with their temp files, and
 * loose temp files a day old. Only `pdfUpload`'s temp files are removed, never another file.
 * Safe beside live processes sharing the directory, on this host or another. Returns how many
 * temp files were removed.
 */
export async function removeStaleUploads(uploadsDir: string, nowMs = Date.now()): Promise<number> {
  const host = await hostKey();
  const modifiedBefore = (age: number) => async (path: string) => {
    const info = await stat(path).catch(() => undefined);
    return info !== undefined && info.mtimeMs < nowMs - age;
  };
  // A live owner touches its claim: one untouched for long is dead wherever it ran (on this host
  // too, when its PID now belongs to another process).
  const ownerDied = async (claim: RegExpExecArray, path: string) =>
    (claim[1] === host && host !== 'unknown' && !(await processLives(Number(claim[2])))) || (await modifiedBefore(STALE_CLAIM_MS)(path));

  let removed = await removeTempFiles(uploadsDir, modifiedBefore(STALE_LOOSE_FILE_MS));
  for await (const entry of await opendir(uploadsDir)) {
    const claim = CLAIM_NAME.exec(entry.name);
    const path = join(uploadsDir, entry.name);
    if (!entry.isDirectory() || claim === null || !(await ownerDied(claim, path))) continue;
    removed += await removeTempFiles(path);
    // Left when it holds anything else.
    await rmdir(path).catch(() => undefined);
  }
  return removed;
}
