/**
 * `koa-model-gateway/usage`: usage records of model calls: the `UsageStore` interface,
 * `usageRecorder()`, which writes them in batches, and `usageReport()`, which sums them.
 */
export type { UsageFilter, UsageGrouping, UsagePruning, UsageRecord, UsageRow, UsageStore } from './usage-store.js';
export { pruneUsage, type UsageRetention } from './usage-retention.js';
export { usageRecorder, type RecorderTimers, type UsageRecorder, type UsageRecorderOptions } from './usage-recorder.js';
export { usageReport, type UsageGroupTotals, type UsageQuery, type UsageReport, type UsageReportRow, type UsageTotals } from './usage-report.js';
