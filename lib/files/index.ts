export { isFileId, newFileId } from './file-id.js';
export type { FileRecord, FileStore, ListQuery, StockLimits, Usage } from './file-store.js';
export type { BlobInfo, BlobStore } from './blob-store.js';
export type { ValidatedUpload } from './upload-state.js';
export { isUploadTempName, pdfUpload, type PdfUploadOptions } from './pdf-upload.js';
export { filesRouter, DEFAULT_FILE_LIMITS, type FileLimits, type FilesRouterOptions } from './files-router.js';
export { fileObject, type FileObject } from './file-object.js';
export { sendPdf } from './download.js';
export { sweep, type SweepOptions, type SweepResult } from './sweep.js';
