/**
 * `koa-model-gateway/files`: the files API (`filesRouter()`) and its pieces (`pdfUpload()`,
 * `sendPdf()`, the file objects of both shapes), the `FileStore` and `BlobStore` interfaces, and
 * `sweep()`, which removes expired files and orphaned bytes.
 */
export { isFileId, newFileId } from './file-id.js';
export type { FileRecord, FileStore, ListQuery, StockLimits, FileUsage } from './file-store.js';
export type { BlobInfo, BlobStore } from './blob-store.js';
export type { ValidatedUpload } from '../state.js';
export { pdfUpload, type PdfUploadOptions } from './pdf-upload.js';
export { filesRouter, type FilesRouterOptions } from './files-router.js';
export { DEFAULT_FILE_LIMITS, type FileLimits } from './file-limits.js';
export { fileObject, type FileObject } from './file-object.js';
export { anthropicFileObject, anthropicFileShape, openAIFileShape, type AnthropicFileObject, type FileSelection, type FileShape } from './file-shapes.js';
export { anthropicUploadFields, openAIUploadFields, type UploadFields } from './upload-fields.js';
export { sendPdf } from './download.js';
export { sweep, type SweepOptions, type SweepResult } from './sweep.js';
