/**
 * `koa-model-gateway/stores/fs`: a `BlobStore` on a local directory.
 */
export { FsBlobStore, type FsBlobStoreOptions } from './blob-store.js';
