export { createRedisClient, type RedisClientOptions } from './client.js';
export { RedisCreationLimiter, type RedisCreationLimiterOptions } from './creation-limiter.js';
export { RedisModelLimiter, type RedisModelLimiterOptions } from './model-limiter.js';
export type { RedisLimiterOptions } from './redis-limiter.js';
