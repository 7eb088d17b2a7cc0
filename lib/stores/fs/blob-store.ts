import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, opendir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { BlobInfo, BlobStore } from '../../files/blob-store.js';
import { isFileId } from '../../files/file-id.js';

export interface FsBlobStoreOptions {
  /** Where the blobs live, one file per id; created when missing. */
  directory: string;
  /**
   * Temp files older than this, left by a process that crashed while writing, are removed when
   * the orphan sweep lists the blobs. Default 86,400 (a day): far longer than any upload takes.
   */
  staleTempSeconds?: number;
  /**
   * How `putFile` moves a file into the directory. Default: `fs.promises.rename`. Tests replace it
   * to reach the copy that a rename across filesystems (`EXDEV`) falls back to.
   */
  rename?: (from: string, to: string) => Promise<void>;
}

// A blob is written to `.<id>.<random>.tmp` first: never a file id, so never listed or read.
const TEMP_NAME = /^\.file-[A-Za-z0-9_-]{32}\.[0-9a-f]{16}\.tmp$/;

const errorCode = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code;
const isMissing = (err: unknown) => errorCode(err) === 'ENOENT';

async function statIfExists(path: string) {
  try {
    return await stat(path);
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
}

function checkId(id: string): void {
  if (!isFileId(id)) throw new TypeError(`koa-model-gateway: not a file id: ${JSON.stringify(id)}`);
}

/**
 * BlobStore on a local directory. A blob is written to a temp name in the same directory, flushed,
 * and renamed into place, so a crash never leaves a partial file under a file id, and a failed
 * stream leaves nothing. `putFile` flushes a finished file and renames it into place, copying
 * only when it is on another filesystem. Ids are checked with `isFileId` before they become paths.
 * @example
 * const blobs = new FsBlobStore({ directory: '/var/lib/gateway/blobs' });
 * const bytes = await blobs.putFile(id, upload.path);
 */
export class FsBlobStore implements BlobStore {
  readonly #directory: string;
  readonly #staleTempSeconds: number;
  readonly #rename: (from: string, to: string) => Promise<void>;

  constructor(options: FsBlobStoreOptions) {
    const { directory, staleTempSeconds = 86_400, rename: move = rename } = options;
    if (typeof directory !== 'string' || directory === '') {
      throw new TypeError('koa-model-gateway: FsBlobStore needs a directory');
    }
    if (!Number.isFinite(staleTempSeconds) || staleTempSeconds <= 0) {
      throw new TypeError('koa-model-gateway: FsBlobStore staleTempSeconds must be a positive number');
    }
    if (typeof move !== 'function') throw new TypeError('koa-model-gateway: FsBlobStore rename must be a function');
    this.#directory = directory;
    this.#staleTempSeconds = staleTempSeconds;
    this.#rename = move;
  }

  async put(id: string, body: Readable): Promise<number> {
    checkId(id);
    await mkdir(this.#directory, { recursive: true });
    const temp = join(this.#directory, `.${id}.${randomBytes(8).toString('hex')}.tmp`);
    try {
      // `flush` makes the bytes durable before the rename publishes them.
      await pipeline(body, createWriteStream(temp, { flags: 'wx', flush: true }));
      const { size } = await stat(temp);
      await rename(temp, join(this.#directory, id));
      return size;
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
  }

  /**
   * Moves the finished file at `path` (which must not be written any more) to `id`: flushed to disk
   * first, then renamed, so the blob's bytes are durable before it appears. On another filesystem
   * the rename fails with `EXDEV` and the bytes are copied as `put` does, then `path` is removed.
   * On failure nothing is under `id` and `path` is left to its owner.
   */
  async putFile(id: string, path: string): Promise<number> {
    checkId(id);
    await mkdir(this.#directory, { recursive: true });
    const handle = await open(path, 'r+');
    let size: number;
    try {
      await handle.datasync();
      ({ size } = await handle.stat());
    } finally {
      await handle.close();
    }
    try {
      await this.#rename(path, join(this.#directory, id));
      return size;
    } catch (err) {
      if (errorCode(err) !== 'EXDEV') throw err;
    }
    const copied = await this.put(id, createReadStream(path));
    // The blob is stored: a source that cannot be removed is its owner's to clean up, not a failure.
    await rm(path, { force: true }).catch(() => undefined);
    return copied;
  }

  async get(id: string): Promise<Readable | undefined> {
    if (!isFileId(id)) return undefined;
    try {
      // Opened before streaming, so a blob deleted meanwhile still reads whole or not at all.
      const handle = await open(join(this.#directory, id), 'r');
      return handle.createReadStream();
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async delete(id: string): Promise<void> {
    if (!isFileId(id)) return;
    await rm(join(this.#directory, id), { force: true });
  }

  async has(id: string): Promise<boolean> {
    if (!isFileId(id)) return false;
    return (await statIfExists(join(this.#directory, id)))?.isFile() ?? false;
  }

  async *list(): AsyncIterable<BlobInfo> {
    let directory;
    try {
      directory = await opendir(this.#directory);
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    const staleBefore = Date.now() - this.#staleTempSeconds * 1000;
    for await (const entry of directory) {
      const path = join(this.#directory, entry.name);
      if (isFileId(entry.name)) {
        const info = await statIfExists(path); // gone if deleted meanwhile
        if (info?.isFile()) yield { id: entry.name, createdAt: Math.floor(info.mtimeMs / 1000) };
      } else if (TEMP_NAME.test(entry.name)) {
        const info = await statIfExists(path);
        if (info && info.mtimeMs < staleBefore) await rm(path, { force: true });
      }
    }
  }
}
