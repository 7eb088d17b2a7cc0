/**
 * `koa-model-gateway/usage`: usage records of model calls: the `UsageStore` interface,
 * `usageRecorder()`, which writes them in batches, and `usageReport()`, which sums them.
 */
export {
  USAGE_CURSOR,
  type UsageFilter,
  type UsageGrouping,
  type UsagePage,
  type UsagePruning,
  type UsageRecord,
  type UsageRecordFilter,
  type UsageRollup,
  type UsageRollupKey,
  type UsageRow,
  type UsageStore,
} from './usage-store.js';
export { pruneUsage, type UsageRetention } from './usage-retention.js';
export { exportUsage, exportUsageRollups, USAGE_EXPORT_FORMATS, usageRecordFields, type UsageExportFormat } from './usage-export.js';
export { usageRecorder, type RecorderTimers, type UsageRecorder, type UsageRecorderOptions } from './usage-recorder.js';
export { usageReport, type UsageGroupTotals, type UsageQuery, type UsageReport, type UsageReportRow, type UsageTotals } from './usage-report.js';
