import type { Middleware } from 'koa';
import { verifiedKey } from '../auth/api-key.js';
import { visibleModels } from '../auth/model-access.js';
import { listCatalogOptions, type CatalogModel } from './catalog.js';
import { dialectOf } from '../errors/request-dialect.js';
import { anthropicModelPage, openAIModel } from './model-objects.js';

export interface ListModelsOptions {
  catalog: readonly CatalogModel[];
}

/**
 * `GET /v1/models`, only the models on the key's allowlist when it has one, in catalog order.
 * OpenAI's shape `{ object: "list", data: [{ id, object: "model", created, owned_by }] }`, or,
 * when the request carries `anthropic-version`, Anthropic's: `{ data: [{ type: "model", id,
 * display_name, created_at }], has_more, first_id, last_id }`, paged by `limit`, `after_id` and
 * `before_id`. Put it behind `apiKey()` and `requireScope('models:read')`.
 * @example router.get('/v1/models', requireScope('models:read'), listModels({ catalog }))
 */
export function listModels(options: ListModelsOptions): Middleware {
  const catalog = listCatalogOptions(options, 'listModels()');
  return async function listModels(ctx) {
    const models = visibleModels(verifiedKey(ctx), catalog);
    ctx.body = dialectOf(ctx) === 'anthropic' ? anthropicModelPage(models, ctx) : { object: 'list', data: models.map(openAIModel) };
  };
}
