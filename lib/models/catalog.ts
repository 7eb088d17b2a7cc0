import { z } from 'zod';
import { modelPriceSchema } from '../cost/price.js';
import { nonEmptyString, nonNegativeInteger, parseOptions, settingsObject } from '../settings/schemas.js';
import { isObject } from './content.js';
import type { Provider, ProviderEndpoint } from './provider.js';

/**
 * One model of the catalog, as written in code or in a config file: `id` (what clients ask for
 * and key allowlists list), `provider` (the `id` of its provider), `upstreamModel` (the name sent
 * upstream; default: `id`), `created` (Unix seconds shown by `GET /v1/models`; default 0, the
 * epoch, for "unknown"), `owned_by` (shown by `GET /v1/models`; default: the provider's id),
 * `display_name` (shown in Anthropic's shape of the models; default: `id`), `price` (USD per
 * million tokens, `{ input, output, cacheRead?, cacheWrite? }`: what its calls cost; default: none,
 * which `priceCatalog()` looks up in a price table for `upstreamModel`, and costs 0 if not found).
 * @example const model = catalogModelSchema.parse({ id: 'gpt-4.1-mini', provider: 'openai', price: { input: 0.4, output: 1.6, cacheRead: 0.1 } })
 */
export const catalogModelSchema = settingsObject({
  id: nonEmptyString,
  provider: nonEmptyString,
  upstreamModel: nonEmptyString.optional(),
  created: nonNegativeInteger.optional(),
  owned_by: nonEmptyString.optional(),
  display_name: nonEmptyString.optional(),
  price: modelPriceSchema.optional(),
}).transform(({ upstreamModel, created, display_name: displayName, ...model }) => ({
  ...model,
  upstreamModel: upstreamModel ?? model.id,
  created: created ?? 0,
  display_name: displayName ?? model.id,
}));

/** One model of the catalog, as given to `listModels()`, `retrieveModel()`, the model endpoints and `modelsRouter()`. */
export type CatalogModel = z.input<typeof catalogModelSchema>;

/** A catalog model with its defaults filled in. */
export type ResolvedModel = z.output<typeof catalogModelSchema>;

function uniqueIds(ctx: z.RefinementCtx, entries: ReadonlyArray<{ id: string }>, key: string): void {
  const seen = new Set<string>();
  entries.forEach(({ id }, index) => {
    if (seen.has(id)) ctx.addIssue({ code: 'custom', path: [key, index, 'id'], message: `must be unique ('${id}' is taken)` });
    seen.add(id);
  });
}

/**
 * The rules of a catalog across its entries, for a schema's `superRefine`: model ids unique,
 * provider ids unique, and every model's provider among the providers. `keys` names the two lists
 * in the object checked, for the messages.
 * @example settingsObject({ models, providers }).superRefine((value, ctx) => checkCatalog(ctx, value))
 */
export function checkCatalog(
  ctx: z.RefinementCtx,
  catalog: { models: ReadonlyArray<{ id: string; provider: string }>; providers: ReadonlyArray<{ id: string }> },
  keys: { models: string; providers: string } = { models: 'models', providers: 'providers' },
): void {
  uniqueIds(ctx, catalog.models, keys.models);
  uniqueIds(ctx, catalog.providers, keys.providers);
  const providerIds = new Set(catalog.providers.map((provider) => provider.id));
  catalog.models.forEach((model, index) => {
    if (!providerIds.has(model.provider)) {
      ctx.addIssue({ code: 'custom', path: [keys.models, index, 'provider'], message: `must name a configured provider ('${model.provider}' is not one)` });
    }
  });
}

const ENDPOINTS = ['chatCompletions', 'responses', 'messages', 'countTokens'] as const satisfies readonly ProviderEndpoint[];

const isProvider = (value: unknown): value is Provider =>
  isObject(value) && typeof value.id === 'string' && value.id !== '' && ENDPOINTS.some((endpoint) => typeof value[endpoint] === 'function');

const PROVIDER = `must be a Provider: an object with an id and at least one of the methods ${ENDPOINTS.join(', ')}`;
const ARRAY = 'must be an array';

const modelList = z.array(catalogModelSchema, { error: ARRAY });

const endpointCatalog = z
  .object({ catalog: modelList, providers: z.array(z.custom<Provider>(isProvider, { error: PROVIDER }), { error: ARRAY }) })
  .superRefine((value, ctx) => checkCatalog(ctx, { models: value.catalog, providers: value.providers }, { models: 'catalog', providers: 'providers' }));

const listCatalog = z.object({ catalog: modelList }).superRefine((value, ctx) => uniqueIds(ctx, value.catalog, 'catalog'));

/**
 * The `catalog` and `providers` options of a model handler, checked and with the catalog's
 * defaults filled in; `where` names the factory in the message of a bad one.
 */
export function endpointCatalogOptions(options: { catalog: unknown; providers: unknown }, where: string) {
  return parseOptions(endpointCatalog, { catalog: options.catalog, providers: options.providers }, where);
}

/** The `catalog` option of `listModels()`, checked, with its defaults filled in. */
export function listCatalogOptions(options: { catalog: unknown }, where: string): ResolvedModel[] {
  return parseOptions(listCatalog, { catalog: options.catalog }, where).catalog;
}
