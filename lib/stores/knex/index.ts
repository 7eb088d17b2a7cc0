/**
 * `koa-model-gateway/stores/knex`: the stores on PostgreSQL or SQLite through Knex (optional
 * peers), with their migrations (`migrate()`).
 */
export { migrate } from './migrations.js';
export { KnexKeyStore } from './key-store.js';
export { KnexFileStore } from './file-store.js';
export { KnexKeyChanges, type KnexKeyChangesOptions } from './key-changes.js';
export { KnexAdminTokenStore } from './admin-token-store.js';
export { KnexAdminSessionStore } from './admin-session-store.js';
export { KnexAdminUserStore } from './admin-user-store.js';
export { KnexUsageStore } from './usage-store.js';
export { postgresPreparedReads, sqlitePreparedReads, type PgPoolLike, type PreparedReads, type SqliteDatabaseLike } from './prepared-reads.js';
export { DEFAULT_STORE_TIMEOUT_MS, type KnexStoreOptions } from './store-options.js';
export {
  sqliteReader,
  sqliteWriter,
  SqliteWriterGoneError,
  type PreparedWrites,
  type ReportReads,
  type SqliteReader,
  type SqliteWriter,
  type SqliteWriterOptions,
} from './sqlite-writer.js';
export { KnexAccountBudgetStore } from './account-budget-store.js';
export { KnexAuditStore } from './audit-store.js';
export { KnexMcpGrantStore } from './mcp-grant-store.js';
export { KnexMcpCallStore } from './mcp-call-store.js';
