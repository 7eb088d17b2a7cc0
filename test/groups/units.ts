import { loadTogether } from '../helpers/together.js';

// Small files of lib/'s keys, prices, models, metrics and settings, none of them bound by the
// clock (the budgets' and limiters' Redis calls are: they keep workers of their own).
await loadTogether(import.meta.url, [
  '../auth/api-keys.test.js',
  '../cost/prices.test.js',
  '../errors/errors.test.js',
  '../metrics/metrics.test.js',
  '../models/catalog.test.js',
  '../models/event-splitter.test.js',
  '../models/format-registry.test.js',
  '../models/metering.test.js',
  '../models/retry-hints.test.js',
  '../package/docs.test.js',
  '../server/config.test.js',
  '../tracing/no-sdk.test.js',
  '../usage/usage.test.js',
]);
