export { MemoryKeyStore } from './key-store.js';
export { MemoryFileStore } from './file-store.js';
export { MemoryBlobStore } from './blob-store.js';
export { MemoryUsageStore } from './usage-store.js';
