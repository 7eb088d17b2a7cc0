export { migrate } from './migrations.js';
export { KnexKeyStore } from './key-store.js';
export { KnexFileStore } from './file-store.js';
export { KnexUsageStore } from './usage-store.js';
export { postgresPreparedReads, sqlitePreparedReads, type PgPoolLike, type PreparedReads, type SqliteDatabaseLike } from './prepared-reads.js';
export { DEFAULT_STORE_TIMEOUT_MS, type KnexStoreOptions } from './store-options.js';
