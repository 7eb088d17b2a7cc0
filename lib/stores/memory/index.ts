export { MemoryKeyStore } from './key-store.js';
export { MemoryFileStore } from './file-store.js';
export { MemoryBlobStore } from './blob-store.js';
export { MemoryKeyChanges } from './key-changes.js';
export { MemoryAdminTokenStore } from './admin-token-store.js';
export { MemoryAdminSessionStore } from './admin-session-store.js';
export { MemoryUsageStore } from './usage-store.js';
export { MemoryCooldownStore } from '../../models/routing/cooldown-store.js';
