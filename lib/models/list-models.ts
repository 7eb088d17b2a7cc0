import type { Middleware } from 'koa';
import { verifiedKey } from '../auth/api-key.js';
import { visibleModels } from '../auth/model-access.js';
import { listCatalogOptions, type CatalogModel } from './catalog.js';

export interface ListModelsOptions {
  catalog: readonly CatalogModel[];
}

/**
 * `GET /v1/models`: `{ object: "list", data: [{ id, object: "model", created, owned_by }] }` in
 * catalog order, only the models on the key's allowlist when it has one. `owned_by` defaults to
 * the model's provider id. Put it behind `apiKey()` and `requireScope('models:read')`.
 * @example router.get('/v1/models', requireScope('models:read'), listModels({ catalog }))
 */
export function listModels(options: ListModelsOptions): Middleware {
  const catalog = listCatalogOptions(options, 'listModels()');
  return async function listModels(ctx) {
    ctx.body = {
      object: 'list',
      data: visibleModels(verifiedKey(ctx), catalog).map((model) => ({
        id: model.id,
        object: 'model',
        created: model.created,
        owned_by: model.owned_by ?? model.provider,
      })),
    };
  };
}
