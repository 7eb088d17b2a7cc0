export * from './errors/index.js';
export * from './auth/index.js';
export * from './files/index.js';
