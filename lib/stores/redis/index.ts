/**
 * `koa-model-gateway/stores/redis`: the stores several processes share through Redis (ioredis, an
 * optional peer): limiters, key changes, the spend ledger, budget alerts' claims, cooldowns, the
 * response cache.
 */
export { createRedisClient, type RedisClientOptions } from './client.js';
export { RedisCreationLimiter, type RedisCreationLimiterOptions } from './creation-limiter.js';
export { RedisKeyChanges, type RedisKeyChangesOptions } from './key-changes.js';
export { RedisModelLimiter, type RedisModelLimiterOptions } from './model-limiter.js';
export type { RedisLimiterOptions } from './redis-limiter.js';
export { RedisSpendLedger, type RedisSpendLedgerOptions } from './spend-ledger.js';
export { RedisAlertClaims, type RedisAlertClaimsOptions } from './alert-claims.js';
export { RedisCooldownStore, type RedisCooldownStoreOptions } from './cooldown-store.js';
export { RedisResponseCache, type RedisResponseCacheOptions } from './response-cache.js';
