export { migrate } from './migrations.js';
export { KnexKeyStore } from './key-store.js';
