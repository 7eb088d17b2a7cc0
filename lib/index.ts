export * from './errors/index.js';
export * from './auth/index.js';
export * from './files/index.js';
export * from './quota/index.js';
export * from './models/index.js';
export * from './usage/index.js';
export * from './admin/index.js';
export * from './cost/index.js';
export { underPath } from './under-path.js';
