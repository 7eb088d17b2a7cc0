export { MemoryKeyStore } from './key-store.js';
export { MemoryFileStore } from './file-store.js';
export { MemoryBlobStore } from './blob-store.js';
export { MemoryKeyChanges } from './key-changes.js';
export { MemoryAdminTokenStore } from './admin-token-store.js';
export { MemoryAdminSessionStore } from './admin-session-store.js';
export { MemoryUsageStore } from './usage-store.js';
export { MemoryCreationLimiter } from '../../quota/memory-creation-limiter.js';
export { MemoryModelLimiter, type MemoryModelLimiterOptions } from '../../quota/memory-model-limiter.js';
