import { tokenPrice, type TokenPrice } from '../../cost/price.js';
import type { ResolvedModel } from '../catalog.js';
import { embeddingsSender } from '../formats/embeddings/answer.js';
import { translation, type Translation } from '../formats/translate.js';
import type { Provider, ProviderAnswer, ProviderEndpoint, ProviderRequest } from '../provider.js';

/** A catalog model, its price and its deployments that can serve the endpoint's format. */
export interface ModelRoute {
  model: ResolvedModel;
  /** The model's price per token, made once. */
  price: TokenPrice;
  legs: Leg[];
  /** The plan of a one-deployment model without fallbacks, made once: no call of it needs planning. */
  alone: Leg[] | undefined;
}

/**
 * One deployment of a model, and how a call reaches it: the provider's method for the endpoint's
 * format, or the translation to one it speaks.
 */
export interface Leg {
  route: ModelRoute;
  provider: Provider;
  upstreamModel: string;
  weight: number;
  /** The deployment's name in the cooldown store. */
  key: string;
  send: (request: ProviderRequest) => Promise<ProviderAnswer | Response>;
  translation: Translation | undefined;
}

/**
 * Each catalog model's route, made once: its price and its deployments that can serve the
 * `endpoint`'s format, natively or translated to one their provider speaks.
 */
export function modelRoutes(catalog: readonly ResolvedModel[], providers: readonly Provider[], endpoint: ProviderEndpoint): Map<string, ModelRoute> {
  const byId = new Map(providers.map((provider) => [provider.id, provider]));
  const routes = new Map<string, ModelRoute>();
  for (const model of catalog) {
    const route: ModelRoute = { model, price: tokenPrice(model.price), legs: [], alone: undefined };
    for (const { provider: providerId, upstreamModel, weight } of model.deployments) {
      const provider = byId.get(providerId);
      if (provider === undefined) continue;
      const native = endpoint === 'embeddings' ? embeddingsSender(provider) : provider[endpoint]?.bind(provider);
      // A provider that speaks the format is called natively; another is translated to when it can be.
      const translated = native ? undefined : translation(endpoint, provider);
      const send = native ?? translated?.send;
      if (send !== undefined)
        route.legs.push({ route, provider, upstreamModel, weight, key: `${provider.id}/${upstreamModel}`, send, translation: translated });
    }
    if (route.legs.length === 1 && model.fallbacks.length === 0) route.alone = route.legs;
    routes.set(model.id, route);
  }
  return routes;
}
