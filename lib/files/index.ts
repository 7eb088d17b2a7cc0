export { FILE_ID_PATTERN, isFileId, newFileId } from './file-id.js';
export type { FileRecord, FileStore, ListQuery, StockLimits, Usage } from './file-store.js';
export type { BlobInfo, BlobStore } from './blob-store.js';
