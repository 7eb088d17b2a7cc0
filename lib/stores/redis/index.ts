export { createRedisClient, type RedisClientOptions } from './client.js';
export { RedisCreationLimiter, type RedisCreationLimiterOptions } from './creation-limiter.js';
