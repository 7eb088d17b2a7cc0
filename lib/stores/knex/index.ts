export { migrate } from './migrations.js';
export { KnexKeyStore } from './key-store.js';
export { KnexFileStore } from './file-store.js';
export { KnexUsageStore } from './usage-store.js';
