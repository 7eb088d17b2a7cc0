import { isObject } from './content.js';

/**
 * The kinds of upstream provider the gateway can talk to.
 * @example console.log(`kind: one of ${PROVIDER_KINDS.join(', ')}`)
 */
export const PROVIDER_KINDS = ['openai', 'anthropic', 'echo'] as const;

export type ProviderKind = (typeof PROVIDER_KINDS)[number];

/** An upstream provider, as configured. */
export interface ProviderConfig {
  /** The name models refer to it by. */
  id: string;
  /**
   * `openai`: any OpenAI-compatible API, `POST {baseURL}/chat/completions` with `Authorization: Bearer`.
   * `anthropic`: `POST {baseURL}/v1/messages` with `x-api-key`.
   * `echo`: offline, answers with a description of what it received.
   */
  kind: ProviderKind;
  /** Default: `https://api.openai.com/v1` (openai), `https://api.anthropic.com` (anthropic); echo has none. */
  baseURL?: string;
  /** The provider's own credential; never the client's gateway key. Sent only when set. */
  apiKey?: string;
}

/** One model of the catalog. */
export interface CatalogModel {
  /** The id clients ask for, and what key allowlists list. */
  id: string;
  /** The `id` of its provider. */
  provider: string;
  /** The model name sent upstream in place of `id`. */
  upstreamModel: string;
  /** Unix seconds, shown by `GET /v1/models`. */
  created: number;
  /** Shown by `GET /v1/models`. Default: the provider's id. */
  owned_by?: string;
}

const MODEL_KEYS = new Set(['id', 'provider', 'upstreamModel', 'created', 'owned_by']);
const PROVIDER_KEYS = new Set(['id', 'kind', 'baseURL', 'apiKey']);

const fail = (message: string): never => {
  throw new TypeError(`koa-model-gateway: ${message}`);
};

function nonEmptyString(entry: Record<string, unknown>, key: string, where: string): void {
  if (typeof entry[key] !== 'string' || entry[key] === '') fail(`${where}: '${key}' must be a non-empty string`);
}

// Unknown keys are refused so that a typo (`baseUrl`, `upstream_model`) is not silently ignored.
function knownKeys(entry: Record<string, unknown>, allowed: Set<string>, where: string): void {
  for (const key of Object.keys(entry)) {
    if (!allowed.has(key)) fail(`${where}: unknown setting '${key}' (expected ${[...allowed].join(', ')})`);
  }
}

function uniqueIds(entries: ReadonlyArray<{ id: string }>, what: string): void {
  const seen = new Set<string>();
  for (const { id } of entries) {
    if (seen.has(id)) fail(`duplicate ${what} id '${id}'`);
    seen.add(id);
  }
}

/**
 * Checks a model catalog on its own (what `listModels()` needs): every entry well-formed, ids unique.
 * Throws a `koa-model-gateway: ...` TypeError naming the bad entry.
 * @example const models = validateModels(JSON.parse(readFileSync('models.json', 'utf8')))
 */
export function validateModels(models: unknown): CatalogModel[] {
  if (!Array.isArray(models)) return fail('the model catalog must be an array');
  models.forEach((entry: unknown, index) => {
    const where = `models[${index}]`;
    if (!isObject(entry)) return fail(`${where} must be an object`);
    knownKeys(entry, MODEL_KEYS, where);
    for (const key of ['id', 'provider', 'upstreamModel']) nonEmptyString(entry, key, where);
    if (!Number.isSafeInteger(entry.created) || (entry.created as number) < 0) {
      fail(`${where}: 'created' must be a non-negative integer (Unix seconds)`);
    }
    if ('owned_by' in entry) nonEmptyString(entry, 'owned_by', where);
  });
  uniqueIds(models as CatalogModel[], 'model');
  // Copies: a configuration changed after the factories ran does not half-apply.
  return (models as CatalogModel[]).map((model) => ({ ...model }));
}

function validateProvider(entry: unknown, index: number): void {
  const where = `providers[${index}]`;
  if (!isObject(entry)) return fail(`${where} must be an object`);
  knownKeys(entry, PROVIDER_KEYS, where);
  nonEmptyString(entry, 'id', where);
  if (!(PROVIDER_KINDS as readonly unknown[]).includes(entry.kind)) {
    fail(`${where}: unknown kind ${JSON.stringify(entry.kind)} (expected ${PROVIDER_KINDS.join(', ')})`);
  }
  if ('apiKey' in entry) nonEmptyString(entry, 'apiKey', where);
  if ('baseURL' in entry) {
    if (entry.kind === 'echo') fail(`${where}: an echo provider has no baseURL`);
    const url = typeof entry.baseURL === 'string' && URL.canParse(entry.baseURL) ? new URL(entry.baseURL) : null;
    if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      fail(`${where}: 'baseURL' must be an http:// or https:// URL`);
    }
    // fetch refuses such a URL on every request; the message does not repeat it, password and all.
    if (url !== null && (url.username !== '' || url.password !== '')) fail(`${where}: 'baseURL' must not hold credentials: put them in 'apiKey'`);
  }
}

/**
 * Checks models and providers together: each well-formed, ids unique, every model's provider
 * configured. The handlers call it once, in their factory; call it yourself to fail at start-up
 * with the same message before building anything.
 * Throws a `koa-model-gateway: ...` TypeError naming the bad entry.
 * @example
 * const { models, providers } = validateCatalog(config.models, config.providers)
 */
export function validateCatalog(models: unknown, providers: unknown): { models: CatalogModel[]; providers: ProviderConfig[] } {
  const checkedModels = validateModels(models);
  if (!Array.isArray(providers)) return fail('the providers must be an array');
  providers.forEach(validateProvider);
  const checkedProviders = (providers as ProviderConfig[]).map((provider) => ({ ...provider }));
  uniqueIds(checkedProviders, 'provider');
  const providerIds = new Set(checkedProviders.map((provider) => provider.id));
  checkedModels.forEach((model, index) => {
    if (!providerIds.has(model.provider)) fail(`models[${index}] ('${model.id}'): unknown provider '${model.provider}'`);
  });
  return { models: checkedModels, providers: checkedProviders };
}
