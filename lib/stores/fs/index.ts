export { FsBlobStore, type FsBlobStoreOptions } from './blob-store.js';
