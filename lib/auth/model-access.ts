import type { VerifiedKey } from '../state.js';

/** The outcome of the one allowlist policy. */
export type ModelAccess = 'allowed' | 'not_allowed' | 'unknown';

/**
 * The one allowlist policy, used by the models listing and both inference endpoints. Ids match
 * exactly. A model outside the key's list is `not_allowed` whether or not the catalog has it, so
 * the list never reveals what else the catalog holds.
 * @example if (modelAccess(verifiedKey(ctx), new Set(catalog.map((m) => m.id)), body.model) !== 'allowed') throw errors.forbidden()
 */
export function modelAccess(key: Pick<VerifiedKey, 'models'>, catalog: ReadonlySet<string>, model: string): ModelAccess {
  if (key.models !== null && !key.models.includes(model)) return 'not_allowed';
  return catalog.has(model) ? 'allowed' : 'unknown';
}

/**
 * The catalog entries this key may see, in catalog order.
 * @example const ids = visibleModels(verifiedKey(ctx), catalog).map((model) => model.id)
 */
export function visibleModels<M extends { id: string }>(key: Pick<VerifiedKey, 'models'>, catalog: readonly M[]): M[] {
  return key.models === null ? [...catalog] : catalog.filter((model) => key.models?.includes(model.id));
}
