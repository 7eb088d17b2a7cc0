import Router from '@koa/router';
import { requireScope } from '../auth/require-scope.js';
import { spendBudgets } from '../cost/budgets.js';
import { MemoryModelLimiter } from '../stores/memory/model-limiter.js';
import { MemorySpendLedger } from '../stores/memory/spend-ledger.js';
import { endpointCatalogOptions } from './catalog.js';
import { FORMATS } from './formats/registry.js';
import { listModels } from './list-models.js';
import { meterModelCalls, type MeterModelCallsOptions } from './meter-model-calls.js';
import { MemoryCooldownStore } from '../stores/memory/cooldown-store.js';
import { modelEndpoint, type ModelEndpointOptions } from './model-endpoint.js';
import { retrieveModel } from './retrieve-model.js';

/** Options of `modelsRouter()`: the endpoints' own, and where their calls are metered. */
export interface ModelsRouterOptions extends ModelEndpointOptions, Pick<MeterModelCallsOptions, 'usageRecorder' | 'metrics'> {}

/**
 * The models API, each endpoint behind its scope: `GET /v1/models` and `GET /v1/models/{model}`
 * (`models:read`), `POST /v1/chat/completions` (`chat:completions`), `POST /v1/responses`
 * (`responses:create`), `POST /v1/messages` and `POST /v1/messages/count_tokens`
 * (`messages:create`), `POST /v1/embeddings` (`embeddings:create`), on one catalog and one set of providers. Every model call (all but the two
 * `GET`s) is metered (`meterModelCalls()`: a usage record to `usageRecorder`, and `metrics`) and
 * counted against the key's limits by one `modelLimiter` shared by the endpoints (default: a
 * `MemoryModelLimiter` of the router's own), and against the key's and its account's budgets in
 * money by one `budgets` (default: the keys' budgets on a `MemorySpendLedger` of the router's own);
 * failing deployments cool down in one `routing.cooldown.store` (default: a `MemoryCooldownStore` of
 * the router's own). Mount it behind `gatewayErrors()` (Shape B on
 * /v1/messages, and on /v1/models with `anthropic-version`) and `underPath('/v1', apiKey(...))`,
 * with its `allowedMethods()`, as `filesRouter()`. Paths match exactly (case-sensitive, no
 * trailing slash); a model id may hold `/`.
 * @example
 * const models = modelsRouter({ catalog: [{ id: 'echo-1', provider: 'echo' }], providers: [echoProvider({ id: 'echo' })] });
 * app.use(models.routes()).use(models.allowedMethods());
 */
export function modelsRouter(options: ModelsRouterOptions): Router {
  // Checked here too, so that a bad catalog is named as this factory's option.
  endpointCatalogOptions(options, 'modelsRouter()');
  const { usageRecorder, metrics, ...endpointOptions } = options;
  const endpoints: ModelEndpointOptions = {
    ...endpointOptions,
    modelLimiter: options.modelLimiter ?? new MemoryModelLimiter(options.nowMs ? { nowMs: options.nowMs } : {}),
    budgets: options.budgets ?? spendBudgets({ ledger: new MemorySpendLedger(options.nowMs ? { nowMs: options.nowMs } : {}) }),
    // One cooldown store for every endpoint: a deployment that fails for one format is skipped by all.
    routing: { ...options.routing, cooldown: { ...options.routing?.cooldown, store: options.routing?.cooldown?.store ?? new MemoryCooldownStore() } },
  };
  // Nothing to meter for: no middleware.
  const meter =
    usageRecorder || metrics
      ? [meterModelCalls({ ...(usageRecorder && { usageRecorder }), ...(metrics && { metrics }), ...(options.nowMs && { nowMs: options.nowMs }) })]
      : [];
  const router = new Router({ sensitive: true, strict: true });
  const catalog = { catalog: options.catalog };
  router.get('/v1/models', requireScope('models:read'), listModels(catalog));
  router.get('/v1/models/*model', requireScope('models:read'), retrieveModel(catalog));
  // Every format of the registry at its path, behind its scope.
  for (const format of Object.values(FORMATS)) router.post(format.path, ...meter, requireScope(format.scope), modelEndpoint(format, endpoints));
  return router;
}
