import type { ParsedUrlQuery } from 'node:querystring';
import { fileObject } from './file-object.js';
import type { FileRecord, ListQuery } from './file-store.js';
import { anthropicListQuery, listQuery } from './list-query.js';
import { anthropicUploadFields, openAIUploadFields, type UploadFields } from './upload-fields.js';

/** What a list request reads: a page of the store's list, or the live files among `ids`. */
export type FileSelection = ListQuery | { ids: readonly string[] };

/**
 * One wire format of the files API: how its upload form is read, and how files, lists and
 * deletions are written. The store, ids, rules and limits behind it are the same for every shape.
 */
export interface FileShape {
  uploadFields: UploadFields;
  file(record: FileRecord): object;
  /** What a list request reads, and the answer the files read make (in the store's order for a page, newest first for `ids`). */
  list(params: ParsedUrlQuery): { query: FileSelection; answer(files: readonly FileRecord[], hasMore: boolean): object };
  deleted(id: string): object;
}

/**
 * OpenAI's shape, api.md's: the file object, `{ object: "list", data, first_id, last_id, has_more }`
 * paged by `order`, `limit` and `after`, and `{ id, object: "file", deleted: true }`.
 * @example ctx.body = openAIFileShape.deleted(id)
 */
export const openAIFileShape: FileShape = {
  uploadFields: openAIUploadFields,
  file: fileObject,
  list(params) {
    return {
      query: listQuery(params),
      answer: (files, hasMore) => ({
        object: 'list',
        data: files.map(fileObject),
        first_id: files[0]?.id ?? null,
        last_id: files.at(-1)?.id ?? null,
        has_more: hasMore,
      }),
    };
  },
  deleted: (id) => ({ id, object: 'file', deleted: true }),
};

/** A file in Anthropic's shape; `expires_at` only when an expiry was set. */
export interface AnthropicFileObject {
  id: string;
  type: 'file';
  filename: string;
  mime_type: 'application/pdf';
  size_bytes: number;
  /** RFC 3339, whole seconds. */
  created_at: string;
  downloadable: true;
  expires_at?: string;
}

/** Unix seconds as RFC 3339 in UTC, without the fraction the stored seconds never have. */
const rfc3339 = (seconds: number) => new Date(seconds * 1000).toISOString().replace(/\.000Z$/, 'Z');

/**
 * The API's view of a stored file in Anthropic's shape (`client.beta.files` of @anthropic-ai/sdk).
 * @example ctx.body = anthropicFileObject(record)
 */
export function anthropicFileObject(record: FileRecord): AnthropicFileObject {
  const object: AnthropicFileObject = {
    id: record.id,
    type: 'file',
    filename: record.filename,
    mime_type: 'application/pdf',
    size_bytes: record.bytes,
    created_at: rfc3339(record.createdAt),
    // Every file here was uploaded to be read back, unlike Anthropic's own uploads.
    downloadable: true,
  };
  if (record.expiresAt !== null) object.expires_at = rfc3339(record.expiresAt);
  return object;
}

/**
 * Anthropic's shape: `anthropicFileObject()`, lists newest first as
 * `{ data, first_id, last_id, has_more, next_page }` paged by `limit` and one of `after_id`,
 * `before_id` and `page` (Anthropic's SDKs page with `after_id`, or with `page` from `next_page`)
 * or filtered by `ids`, and `{ id, type: "file_deleted" }`. `next_page` is the cursor of the older
 * files that follow, null when none do or the page was asked with `before_id`.
 * @example const { query, answer } = anthropicFileShape.list(ctx.query)
 */
export const anthropicFileShape: FileShape = {
  uploadFields: anthropicUploadFields,
  file: anthropicFileObject,
  list(params) {
    const { query, backwards } = anthropicListQuery(params);
    return {
      query,
      answer(storeOrder, hasMore) {
        const files = backwards ? [...storeOrder].reverse() : storeOrder;
        const lastId = files.at(-1)?.id ?? null;
        return {
          data: files.map(anthropicFileObject),
          first_id: files[0]?.id ?? null,
          last_id: lastId,
          has_more: hasMore,
          next_page: hasMore && !backwards ? lastId : null,
        };
      },
    };
  },
  deleted: (id) => ({ id, type: 'file_deleted' }),
};
