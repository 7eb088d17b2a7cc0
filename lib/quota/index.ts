export type { CreationLimiter, CreationReservation } from './creation-limiter.js';
export {
  DEFAULT_CREATION_LIMITS,
  type CreationLimits,
  type CreationLimitsOptions,
  type CreationRefusal,
  type CreationUsage,
} from './creation-limits.js';
export { MemoryCreationLimiter } from './memory-creation-limiter.js';
export { fileQuota, type FileQuotaOptions } from './file-quota.js';
