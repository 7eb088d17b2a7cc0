export { migrate } from './migrations.js';
export { KnexKeyStore } from './key-store.js';
export { KnexFileStore } from './file-store.js';
export { postgresPreparedReads, sqlitePreparedReads, type PgPoolLike, type PreparedReads, type SqliteDatabaseLike } from './prepared-reads.js';
export type { KnexStoreOptions } from './store-options.js';
