import { errors } from '../errors/gateway-error.js';
import type { BlobStore } from '../files/blob-store.js';
import type { FileRecord, FileStore } from '../files/file-store.js';
import type { JsonObject } from './content.js';

/** A stored PDF, ready to be sent upstream. */
interface AttachedFile {
  filename: string;
  /** The PDF's bytes, base64. */
  data: string;
}

export interface FileStores {
  files: FileStore;
  blobs: BlobStore;
}

/**
 * The records of the stored PDFs behind `ids` (already checked to be file ids), from the caller's
 * account only: an unknown, expired or foreign id is 404 `File not found`, as is any id when the
 * gateway has no file stores. Sizes are checked against `maxBytes` from the metadata; an id
 * attached twice counts twice, since it is sent twice. Ids are looked up one at a time and the
 * first that fails ends the request: a body naming thousands of ids costs no more store reads than
 * the account has files. No bytes are read: `readAttachments()` does that, once the call is let through.
 */
export async function findAttachments(
  stores: FileStores | undefined,
  account: string,
  ids: readonly string[],
  nowSeconds: number,
  maxBytes: number,
): Promise<FileRecord[]> {
  if (ids.length === 0) return [];
  if (stores === undefined) throw errors.fileNotFound();
  const records = new Map<string, FileRecord>();
  let total = 0;
  for (const id of ids) {
    let record = records.get(id);
    if (record === undefined) {
      record = await stores.files.get(account, id, nowSeconds);
      if (record === undefined) throw errors.fileNotFound();
      records.set(id, record);
    }
    total += record.bytes;
    if (total > maxBytes) throw errors.invalidRequest(`The attached files may total at most ${maxBytes} bytes`);
  }
  return [...records.values()];
}

/** The bytes of the files `findAttachments()` found, by id; one whose bytes are gone (deleted meanwhile) is 404. */
export async function readAttachments(stores: FileStores | undefined, records: readonly FileRecord[]): Promise<Map<string, AttachedFile>> {
  const loaded = new Map<string, AttachedFile>();
  for (const record of records) {
    const blob = await stores?.blobs.get(record.id);
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
