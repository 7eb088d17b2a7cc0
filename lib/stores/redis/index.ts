export { createRedisClient, type RedisClientOptions } from './client.js';
export { RedisCreationLimiter, type RedisCreationLimiterOptions } from './creation-limiter.js';
export { RedisKeyChanges, type RedisKeyChangesOptions } from './key-changes.js';
