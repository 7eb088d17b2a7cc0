import type { Readable } from 'node:stream';

export interface BlobInfo {
  id: string;
  /** When the blob was written, Unix seconds. */
  createdAt: number;
}

/**
 * Where file bytes live, by file id. A blob appears under its id only when completely written.
 * Implementations: memory, filesystem.
 */
export interface BlobStore {
  /** Stores the stream's bytes under `id`, returning the byte count; nothing is left behind if the stream fails. */
  put(id: string, body: Readable): Promise<number>;
  /**
   * Optional. Takes ownership of the file at `path`: moves it into place when it can, else copies;
   * returns the byte count; nothing is left under `id` on failure.
   */
  putFile?(id: string, path: string): Promise<number>;
  /** The bytes of `id`, or `undefined` when there is no such blob. */
  get(id: string): Promise<Readable | undefined>;
  /** Removes `id`; removing a missing blob is not an error. */
  delete(id: string): Promise<void>;
  has(id: string): Promise<boolean>;
  /** Every blob, for the orphan sweep. */
  list(): AsyncIterable<BlobInfo>;
}
