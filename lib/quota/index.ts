/**
 * `koa-model-gateway/quota`: limits. File creations (`fileQuota()` on a `CreationLimiter`) and
 * model calls (the `ModelLimiter` interface, `checkModelLimits()` for implementations, the 429 and
 * rate-limit headers). The limiters themselves are stores: `koa-model-gateway/stores/memory` and
 * `/stores/redis`.
 */
export type { CreationLimiter, CreationReservation } from './creation-limiter.js';
export { DEFAULT_CREATION_LIMITS, type CreationLimits, type CreationLimitsOptions, type CreationRefusal, type CreationUsage } from './creation-limits.js';
export { fileQuota, type FileQuotaOptions } from '../files/file-quota.js';
export type { ModelLimiter } from './model-limiter.js';
export { checkModelLimits, type LimitWindow, type ModelLimitDecision, type ModelLimits, type ModelUsage } from './model-limits.js';
export { modelLimitRefusal, rateLimitHeaders, type RateLimitHeaderStyle } from './rate-limit-headers.js';
