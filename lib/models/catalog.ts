import { z } from 'zod';
import { modelPriceSchema } from '../cost/price.js';
import { nonEmptyString, nonNegativeInteger, parseOptions, positiveInteger, settingsObject } from '../settings/schemas.js';
import { isObject } from './content.js';
import { FORMATS } from './formats/registry.js';
import type { Provider, ProviderEndpoint } from './provider.js';

/** Which endpoints a catalog model serves: the chat endpoints, or `/v1/embeddings`. */
export const MODEL_TYPES = ['chat', 'embeddings'] as const;

/**
 * One deployment of a catalog model: the `id` of a provider, the name sent to it (`upstreamModel`;
 * default: the model's `id`) and its share of the model's calls (`weight`, a positive integer;
 * default 1).
 */
export const deploymentSchema = settingsObject({
  provider: nonEmptyString,
  upstreamModel: nonEmptyString.optional(),
  weight: positiveInteger.optional(),
});

/**
 * One model of the catalog, as written in code or in a config file: `id` (what clients ask for
 * and key allowlists list), `provider` (the `id` of its provider), `upstreamModel` (the name sent
 * upstream; default: `id`), or instead of those two `deployments` (`[{ provider, upstreamModel?,
 * weight? }]`: calls are spread over the healthy ones by weight, and a failed one is retried on
 * another), `fallbacks` (ids of other catalog models tried in order when every deployment failed;
 * a fallback needs no allowlist entry of its own, and its own fallbacks are not followed),
 * `created` (Unix seconds shown by `GET /v1/models`; default 0, the epoch, for "unknown"),
 * `owned_by` (shown by `GET /v1/models`; default: the first deployment's provider id),
 * `display_name` (shown in Anthropic's shape of the models; default: `id`), `max_input_tokens`
 * and `max_tokens` (its context window and largest output, shown in Anthropic's shape of the
 * models; default: unknown, shown as null), `price` (USD per
 * million tokens, `{ input, output, cacheRead?, cacheWrite? }`: what its calls cost; default: none,
 * which `priceCatalog()` looks up in a price table for `upstreamModel` under `provider`, the
 * first deployment's for a model of `deployments`, and costs 0 if not found), `type` (`"chat"`:
 * served by the chat endpoints, the default; `"embeddings"`: by `/v1/embeddings` only),
 * `maxOutputTokens` (the most output tokens it writes in one answer: what a call that names no
 * maximum reserves against budgets; default: `spendBudgets()`'s `defaultMaxOutputTokens`), `cache`
 * (`{ ttlSeconds }`: its answers kept that long by the model endpoints' response cache, when they
 * have one; default: none, unless a key or a call asks).
 * Resolved, `provider` and `upstreamModel` are those of the first deployment.
 * @example const model = catalogModelSchema.parse({ id: 'gpt-4.1-mini', provider: 'openai', price: { input: 0.4, output: 1.6, cacheRead: 0.1 } })
 * @example const smart = catalogModelSchema.parse({ id: 'smart', deployments: [{ provider: 'openai-east', upstreamModel: 'gpt-4.1', weight: 3 }, { provider: 'openai-west', upstreamModel: 'gpt-4.1' }], fallbacks: ['claude'] })
 */
export const catalogModelSchema = settingsObject({
  id: nonEmptyString,
  provider: nonEmptyString.optional(),
  upstreamModel: nonEmptyString.optional(),
  deployments: z.array(deploymentSchema, { error: 'must be an array' }).min(1, { error: 'must list at least one deployment' }).optional(),
  fallbacks: z.array(nonEmptyString, { error: 'must be an array' }).optional(),
  created: nonNegativeInteger.optional(),
  owned_by: nonEmptyString.optional(),
  display_name: nonEmptyString.optional(),
  max_input_tokens: positiveInteger.optional(),
  max_tokens: positiveInteger.optional(),
  price: modelPriceSchema.optional(),
  cache: settingsObject({ ttlSeconds: positiveInteger }).optional(),
  type: z.enum(MODEL_TYPES, { error: "must be 'chat' or 'embeddings'" }).optional(),
  maxOutputTokens: positiveInteger.optional(),
})
  .superRefine((model, ctx) => {
    if (model.deployments === undefined && model.provider === undefined)
      ctx.addIssue({ code: 'custom', path: ['provider'], message: 'must be given (or deployments)' });
    // A resolved model (which names its first deployment as well) is a valid model too.
    const first = model.deployments?.[0];
    const same =
      first !== undefined &&
      (model.provider === undefined || model.provider === first.provider) &&
      (model.upstreamModel === undefined || model.upstreamModel === (first.upstreamModel ?? model.id));
    if (model.deployments !== undefined && !same) {
      ctx.addIssue({ code: 'custom', path: ['deployments'], message: 'cannot go with provider or upstreamModel (list them as a deployment)' });
    }
  })
  .transform(({ provider, upstreamModel, deployments, fallbacks, created, display_name: displayName, type, ...model }) => {
    const listed = (deployments ?? [{ provider: provider ?? '', upstreamModel }]).map((deployment) => ({
      provider: deployment.provider,
      upstreamModel: deployment.upstreamModel ?? model.id,
      weight: deployment.weight ?? 1,
    }));
    const first = listed[0] as { provider: string; upstreamModel: string };
    return {
      ...model,
      provider: first.provider,
      upstreamModel: first.upstreamModel,
      deployments: listed,
      fallbacks: fallbacks ?? [],
      created: created ?? 0,
      display_name: displayName ?? model.id,
      type: type ?? 'chat',
    };
  });

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
 * provider ids unique, every deployment's provider among the providers, and every fallback another
 * model of the catalog, of the same type. `keys` names the two lists in the object checked, for the messages.
 * @example settingsObject({ models, providers }).superRefine((value, ctx) => checkCatalog(ctx, value))
 */
export function checkCatalog(
  ctx: z.RefinementCtx,
  catalog: { models: readonly ResolvedModel[]; providers: ReadonlyArray<{ id: string }> },
  keys: { models: string; providers: string } = { models: 'models', providers: 'providers' },
): void {
  uniqueIds(ctx, catalog.models, keys.models);
  uniqueIds(ctx, catalog.providers, keys.providers);
  const providerIds = new Set(catalog.providers.map((provider) => provider.id));
  const modelTypes = new Map(catalog.models.map((model) => [model.id, model.type]));
  catalog.models.forEach((model, index) => {
    // A model refused by its own schema has no deployments to check.
    if (!Array.isArray(model.deployments) || !Array.isArray(model.fallbacks)) return;
    model.deployments.forEach((deployment, at) => {
      if (providerIds.has(deployment.provider)) return;
      // The one-deployment shorthand is named as it was written.
      const path = model.deployments.length === 1 ? [keys.models, index, 'provider'] : [keys.models, index, 'deployments', at, 'provider'];
      ctx.addIssue({ code: 'custom', path, message: `must name a configured provider ('${deployment.provider}' is not one)` });
    });
    model.fallbacks.forEach((fallback, at) => {
      const type = modelTypes.get(fallback);
      const path = [keys.models, index, 'fallbacks', at];
      if (type === undefined || fallback === model.id)
        ctx.addIssue({ code: 'custom', path, message: `must name another model of the catalog ('${fallback}' is not one)` });
      // A fallback answers the same endpoints: a chat model's is a chat model.
      else if (type !== model.type) ctx.addIssue({ code: 'custom', path, message: `must name a model of the same type ('${fallback}' is of type ${type})` });
    });
  });
}

// A provider's methods: one per format, and embed().
const ENDPOINTS: ReadonlyArray<keyof Provider> = [...(Object.keys(FORMATS) as ProviderEndpoint[]), 'embed'];

const speaksNeutral = (neutral: unknown) =>
  isObject(neutral) && typeof neutral.name === 'string' && typeof neutral.generate === 'function' && typeof neutral.stream === 'function';

const isProvider = (value: unknown): value is Provider =>
  isObject(value) &&
  typeof value.id === 'string' &&
  value.id !== '' &&
  (ENDPOINTS.some((endpoint) => typeof value[endpoint] === 'function') || speaksNeutral(value.neutral));

const PROVIDER = `must be a Provider: an object with an id and at least one of the methods ${ENDPOINTS.join(', ')}, or a neutral face ({ name, generate, stream })`;
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
