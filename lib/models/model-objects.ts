import type { Context } from 'koa';
import { errors } from '../errors/gateway-error.js';
import type { ResolvedModel } from './catalog.js';

/** A model in OpenAI's shape: `{ id, object: "model", created, owned_by }`; `owned_by` defaults to the provider's id. */
export const openAIModel = (model: ResolvedModel) => ({
  id: model.id,
  object: 'model',
  created: model.created,
  owned_by: model.owned_by ?? model.provider,
});

/**
 * A model in Anthropic's shape: `{ type: "model", id, display_name, created_at }`, `created_at` in
 * RFC 3339, with every other field @anthropic-ai/sdk's `ModelInfo` declares: its token limits where
 * the catalog says them, `lifecycle` active (it is callable), and null for what the gateway cannot know.
 */
export const anthropicModel = (model: ResolvedModel) => ({
  type: 'model',
  id: model.id,
  display_name: model.display_name,
  created_at: new Date(model.created * 1000).toISOString().replace(/\.000Z$/, 'Z'),
  max_input_tokens: model.max_input_tokens ?? null,
  max_tokens: model.max_tokens ?? null,
  lifecycle: 'active',
  deprecated_at: null,
  retires_at: null,
  capabilities: null,
  line: null,
});

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 1000;

/** One query parameter given at most once, or undefined. */
function single(ctx: Context, name: string): string | undefined {
  const value = ctx.query[name];
  if (Array.isArray(value)) throw errors.invalidRequest(`'${name}' may be given once`);
  return value;
}

/** Where in `models` the id of a cursor parameter is; a cursor must name a model of the list. */
function position(models: readonly ResolvedModel[], name: string, id: string): number {
  const at = models.findIndex((model) => model.id === id);
  if (at === -1) throw errors.invalidRequest(`'${name}' must be the id of a model on the list`);
  return at;
}

/**
 * One page of `models` (already filtered to what the key may see, in catalog order), as Anthropic
 * pages its models list: `limit` (1 to 1,000, default 20), and at most one of `after_id` (the
 * models after that one) and `before_id` (the `limit` models just before it). `has_more` says
 * whether more follow in the direction asked; `first_id` and `last_id` are null on an empty page.
 * @example ctx.body = anthropicModelPage(visibleModels(key, catalog), ctx)
 */
export function anthropicModelPage(models: readonly ResolvedModel[], ctx: Context) {
  const rawLimit = single(ctx, 'limit');
  const afterId = single(ctx, 'after_id');
  const beforeId = single(ctx, 'before_id');
  const limit = rawLimit === undefined ? DEFAULT_LIMIT : Number(rawLimit);
  if (rawLimit !== undefined && !/^\d+$/.test(rawLimit)) throw errors.invalidLimit(MAX_LIMIT);
  if (limit < 1 || limit > MAX_LIMIT) throw errors.invalidLimit(MAX_LIMIT);
  if (afterId !== undefined && beforeId !== undefined) throw errors.invalidRequest("'after_id' and 'before_id' cannot be given together");
  let start = 0;
  let end = Math.min(limit, models.length);
  let hasMore = end < models.length;
  if (afterId !== undefined) {
    start = position(models, 'after_id', afterId) + 1;
    end = Math.min(start + limit, models.length);
    hasMore = end < models.length;
  } else if (beforeId !== undefined) {
    end = position(models, 'before_id', beforeId);
    start = Math.max(0, end - limit);
    hasMore = start > 0;
  }
  const page = models.slice(start, end);
  return {
    data: page.map(anthropicModel),
    has_more: hasMore,
    first_id: page[0]?.id ?? null,
    last_id: page.at(-1)?.id ?? null,
  };
}
