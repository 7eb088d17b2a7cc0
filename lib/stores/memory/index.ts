/**
 * `koa-model-gateway/stores/memory`: every store interface in the process's memory, the limiters
 * among them; no dependency beyond the package's own.
 */
export { MemoryKeyStore } from './key-store.js';
export { MemoryFileStore } from './file-store.js';
export { MemoryBlobStore } from './blob-store.js';
export { MemoryKeyChanges } from './key-changes.js';
export { MemoryAdminTokenStore } from './admin-token-store.js';
export { MemoryAdminSessionStore } from './admin-session-store.js';
export { MemoryAdminUserStore } from './admin-user-store.js';
export { MemoryUsageStore } from './usage-store.js';
export { MemoryAuditStore } from './audit-store.js';
export { MemoryCreationLimiter } from './creation-limiter.js';
export { MemoryModelLimiter, type MemoryModelLimiterOptions } from './model-limiter.js';
export { MemoryCooldownStore } from './cooldown-store.js';
export { MemorySpendLedger, type MemorySpendLedgerOptions } from './spend-ledger.js';
export { MemoryAccountBudgetStore } from './account-budget-store.js';
export { MemoryMcpGrantStore } from './mcp-grant-store.js';
export { MemoryMcpCallStore } from './mcp-call-store.js';
export { MemoryAlertClaims } from './alert-claims.js';
export { MemoryResponseCache, type MemoryResponseCacheOptions } from './response-cache.js';
