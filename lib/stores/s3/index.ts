export { S3BlobStore, type S3BlobStoreOptions } from './blob-store.js';
