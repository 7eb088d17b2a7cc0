import type * as GenaiPrices from '@pydantic/genai-prices';
import type { ModelPrice } from './price.js';

/**
 * A catalog model as `priceCatalog()` reads it: as written (a `CatalogModel`: `provider` and
 * `upstreamModel`, or `deployments`) or resolved (`catalogModelSchema`'s output, which has both).
 */
interface PricedModel {
  id: string;
  provider?: string | undefined;
  upstreamModel?: string | undefined;
  deployments?: ReadonlyArray<{ provider: string; upstreamModel?: string | undefined }> | undefined;
  price?: { input: number; output: number; cacheRead?: number | undefined; cacheWrite?: number | undefined } | undefined;
  type?: 'chat' | 'embeddings' | undefined;
}

/** What `priceCatalog()` answers. */
export interface PricedCatalog<Model> {
  /** The catalog, each model with its own price or, failing that, the table's; without one when neither has it. */
  models: Model[];
  /** The ids of the models with no known price: their calls cost 0. */
  unpriced: string[];
}

// The table's price keys (USD per million tokens) for ours.
const TABLE_KEYS = { input: 'input_mtok', output: 'output_mtok', cacheRead: 'cache_read_mtok', cacheWrite: 'cache_write_mtok' } as const;

/** A table price as a number: a tiered price by its base tier (the price of a prompt under the first threshold). */
function tablePrice(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value === 'object' && value !== null && typeof (value as { base?: unknown }).base === 'number') return (value as { base: number }).base;
  return undefined;
}

/**
 * The catalog with every model's price: its own `price` when the catalog gives one, else the
 * price that `@pydantic/genai-prices` (a maintained table, bundled: no download) lists for its
 * upstream model name, under the provider of the same id if the table has it (`openai`,
 * `anthropic`, ...), else under whichever provider the table matches the name to; a model the
 * catalog prices by `input` and `output` only takes its `cacheRead` and `cacheWrite` from the
 * table when the table has them (else they stay the input price). A model listed
 * by its `deployments` is looked up by its first deployment's (its `upstreamModel`, default the
 * model's `id`, under its `provider`), as the catalog resolves it; a model of `type: "embeddings"`
 * needs only an input price (its output costs 0). Models found in neither are
 * listed in `unpriced`: their calls cost 0. Call it once, at start-up: the table is loaded then,
 * never on the way of a request.
 * @example
 * const { models, unpriced } = await priceCatalog(config.models)
 * if (unpriced.length > 0) logger.warn({ models: unpriced }, 'models without a price cost 0')
 * app.use(modelsRouter({ catalog: models, providers }).routes())
 */
export async function priceCatalog<Model extends PricedModel>(catalog: readonly Model[]): Promise<PricedCatalog<Model>> {
  const unpriced: string[] = [];
  // Loaded only when a model needs it: the table is a few MiB (~170 ms to load).
  const table = catalog.some(needsTable) ? await import('@pydantic/genai-prices') : undefined;
  const models = catalog.map((model) => {
    if (table === undefined || !needsTable(model)) return model;
    const found = tableEntry(table, model);
    if (model.price !== undefined) {
      // Priced by input and output only: the cache prices the table knows, rather than the input price.
      const cacheRead = model.price.cacheRead ?? tablePrice(found?.[TABLE_KEYS.cacheRead]);
      const cacheWrite = model.price.cacheWrite ?? tablePrice(found?.[TABLE_KEYS.cacheWrite]);
      if (cacheRead === model.price.cacheRead && cacheWrite === model.price.cacheWrite) return model;
      return { ...model, price: { ...model.price, ...(cacheRead !== undefined && { cacheRead }), ...(cacheWrite !== undefined && { cacheWrite }) } };
    }
    const input = tablePrice(found?.[TABLE_KEYS.input]);
    // An embeddings model has no output, and the table no output price for it.
    const output = tablePrice(found?.[TABLE_KEYS.output]) ?? (model.type === 'embeddings' ? 0 : undefined);
    if (found === undefined || input === undefined || output === undefined) {
      unpriced.push(model.id);
      return model;
    }
    const price: ModelPrice = { input, output };
    const cacheRead = tablePrice(found[TABLE_KEYS.cacheRead]);
    const cacheWrite = tablePrice(found[TABLE_KEYS.cacheWrite]);
    if (cacheRead !== undefined) price.cacheRead = cacheRead;
    if (cacheWrite !== undefined) price.cacheWrite = cacheWrite;
    return { ...model, price };
  });
  return { models, unpriced };
}

/** Whether the table may give a model a price: none in the catalog, or a cache price left out of one whose input costs something. */
const needsTable = (model: PricedModel) =>
  model.price === undefined || (model.price.input > 0 && (model.price.cacheRead === undefined || model.price.cacheWrite === undefined));

/**
 * The table's prices of a model's upstream name: the first deployment's, as catalogModelSchema
 * resolves a model's provider and upstream model; under its provider first, else under any.
 */
function tableEntry(table: typeof GenaiPrices, model: PricedModel): Record<string, unknown> | undefined {
  const first = model.deployments?.[0];
  const provider = model.provider ?? first?.provider;
  const name = model.upstreamModel ?? first?.upstreamModel ?? model.id;
  const usage = { input_tokens: 0, output_tokens: 0 };
  const found = (provider === undefined ? null : table.calcPrice(usage, name, { providerId: provider })) ?? table.calcPrice(usage, name);
  return found === null ? undefined : (found.model_price as unknown as Record<string, unknown>);
}
