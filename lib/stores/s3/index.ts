/**
 * `koa-model-gateway/stores/s3`: a `BlobStore` on an S3-compatible bucket (the AWS SDK v3, optional
 * peers).
 */
export { S3BlobStore, type S3BlobStoreOptions } from './blob-store.js';
