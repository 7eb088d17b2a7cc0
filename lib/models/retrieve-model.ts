import type { Middleware } from 'koa';
import { verifiedKey } from '../auth/api-key.js';
import { visibleModels } from '../auth/model-access.js';
import { errors } from '../errors/gateway-error.js';
import { listCatalogOptions, type CatalogModel } from './catalog.js';
import { dialectOf } from '../errors/request-dialect.js';
import { anthropicModel, openAIModel } from './model-objects.js';

export interface RetrieveModelOptions {
  catalog: readonly CatalogModel[];
}

/**
 * `GET /v1/models/{model}`: the model in OpenAI's shape, or in Anthropic's when the request
 * carries `anthropic-version` (as `listModels()` shows them). A model that is not in the catalog
 * and one outside the key's allowlist are the same 404 (`The model '<id>' does not exist`, or
 * Anthropic's `Model not found`), so the list never reveals what else the catalog holds. Put it
 * behind `apiKey()` and `requireScope('models:read')`, on a route whose parameter is `model`.
 * Model ids may hold `/`: a wildcard route (`*model`) takes them as sent or percent-encoded.
 * @example router.get('/v1/models/*model', requireScope('models:read'), retrieveModel({ catalog }))
 */
export function retrieveModel(options: RetrieveModelOptions): Middleware {
  const catalog = listCatalogOptions(options, 'retrieveModel()');
  return async function retrieveModel(ctx) {
    const id = (ctx.params as Record<string, string>).model ?? '';
    const model = visibleModels(verifiedKey(ctx), catalog).find((candidate) => candidate.id === id);
    const anthropic = dialectOf(ctx) === 'anthropic';
    if (model === undefined) throw anthropic ? errors.modelNotFound() : errors.modelDoesNotExist(id);
    ctx.body = anthropic ? anthropicModel(model) : openAIModel(model);
  };
}
