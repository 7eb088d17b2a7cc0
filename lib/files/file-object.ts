import type { FileRecord } from './file-store.js';

/** The file object of api.md section 2; `expires_at` only when an expiry was set. */
export interface FileObject {
  id: string;
  object: 'file';
  bytes: number;
  created_at: number;
  filename: string;
  purpose: 'user_data';
  status: 'processed';
  expires_at?: number;
}

/**
 * The API's view of a stored file.
 * @example ctx.body = fileObject(record)
 */
export function fileObject(record: FileRecord): FileObject {
  const object: FileObject = {
    id: record.id,
    object: 'file',
    bytes: record.bytes,
    created_at: record.createdAt,
    filename: record.filename,
    purpose: 'user_data',
    status: 'processed',
  };
  if (record.expiresAt !== null) object.expires_at = record.expiresAt;
  return object;
}
