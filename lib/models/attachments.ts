import { errors } from '../errors/gateway-error.js';
import type { BlobStore } from '../files/blob-store.js';
import type { FileStore } from '../files/file-store.js';
import type { JsonObject } from './content.js';

/** A stored PDF, ready to be sent upstream. */
export interface AttachedFile {
  filename: string;
  /** The PDF's bytes, base64. */
  data: string;
}

export interface FileStores {
  files: FileStore;
  blobs: BlobStore;
}

/**
 * The stored PDFs behind `ids` (already checked to be file ids), from the caller's account only.
 * An unknown, expired or foreign id, or one whose bytes are gone (deleted meanwhile), is 404
 * `File not found`, as is any id when the gateway has no file stores. Sizes are checked against
 * `maxBytes` from the metadata, before any bytes are read; an id attached twice counts twice,
 * since it is sent twice.
 */
export async function loadAttachments(
  stores: FileStores | undefined,
  account: string,
  ids: readonly string[],
  now: number,
  maxBytes: number,
): Promise<Map<string, AttachedFile>> {
  const loaded = new Map<string, AttachedFile>();
  if (ids.length === 0) return loaded;
  if (stores === undefined) throw errors.fileNotFound();
  const unique = [...new Set(ids)];
  const records = await Promise.all(unique.map((id) => stores.files.get(account, id, now)));
  const sizes = new Map<string, number>();
  for (const record of records) {
    if (record === undefined) throw errors.fileNotFound();
    sizes.set(record.id, record.bytes);
  }
  const total = ids.reduce((sum, id) => sum + (sizes.get(id) ?? 0), 0);
  if (total > maxBytes) throw errors.invalidRequest(`The attached files may total at most ${maxBytes} bytes`);
  for (const record of records) {
    if (record === undefined) continue;
    const blob = await stores.blobs.get(record.id);
    if (blob === undefined) throw errors.fileNotFound();
    const chunks: Buffer[] = await blob.toArray();
    loaded.set(record.id, { filename: record.filename, data: Buffer.concat(chunks).toString('base64') });
  }
  return loaded;
}

/** How one endpoint format refers to stored files, and how it carries a PDF upstream. */
export interface FileReferences {
  /**
   * The body with each file reference replaced by `replace(fileId, block)`; `fileId` is whatever
   * the client sent there, not yet checked.
   */
  map(body: JsonObject, replace: (fileId: unknown, block: JsonObject) => JsonObject): JsonObject;
  /** The block that carries `file` itself, in place of the reference `block`. */
  inline(block: JsonObject, file: AttachedFile): JsonObject;
}
