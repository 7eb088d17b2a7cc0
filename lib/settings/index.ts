/**
 * `koa-model-gateway/settings`: the zod schemas of options and configuration, to build a
 * configuration of your own from the same pieces and messages.
 */
export {
  httpBaseUrl,
  nonEmptyString,
  nonNegativeInteger,
  parseOptions,
  positiveInteger,
  settingsMessage,
  settingsObject,
  timerMs,
  timerSeconds,
} from './schemas.js';
export { catalogModelSchema, checkCatalog, type CatalogModel, type ResolvedModel } from '../models/catalog.js';
export { modelLimitsSchema } from '../quota/model-limits.js';
export { modelPriceSchema, type ModelPrice } from '../cost/price.js';
export { routingSettingsSchema } from '../models/routing/routing-options.js';
