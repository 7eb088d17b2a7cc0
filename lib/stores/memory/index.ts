export { MemoryKeyStore } from './key-store.js';
