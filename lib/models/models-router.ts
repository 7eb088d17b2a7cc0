import Router from '@koa/router';
import { requireScope } from '../auth/require-scope.js';
import { endpointCatalogOptions } from './catalog.js';
import { chatCompletions } from './chat-completions.js';
import { countTokens } from './count-tokens.js';
import { listModels } from './list-models.js';
import { messages } from './messages.js';
import type { ModelEndpointOptions } from './model-endpoint.js';
import { responses } from './responses.js';
import { retrieveModel } from './retrieve-model.js';

/**
 * The models API, each endpoint behind its scope: `GET /v1/models` and `GET /v1/models/{model}`
 * (`models:read`), `POST /v1/chat/completions` (`chat:completions`), `POST /v1/responses`
 * (`responses:create`), `POST /v1/messages` and `POST /v1/messages/count_tokens`
 * (`messages:create`), on one catalog and one set of providers. Mount it behind
 * `gatewayErrors()` (Shape B on /v1/messages, and on /v1/models with `anthropic-version`) and
 * `underPath('/v1', apiKey(...))`, with its `allowedMethods()`, as `filesRouter()`. Paths match
 * exactly (case-sensitive, no trailing slash); a model id may hold `/`.
 * @example
 * const models = modelsRouter({ catalog: [{ id: 'echo-1', provider: 'echo' }], providers: [echoProvider({ id: 'echo' })] });
 * app.use(models.routes()).use(models.allowedMethods());
 */
export function modelsRouter(options: ModelEndpointOptions): Router {
  // Checked here too, so that a bad catalog is named as this factory's option.
  endpointCatalogOptions(options, 'modelsRouter()');
  const router = new Router({ sensitive: true, strict: true });
  const catalog = { catalog: options.catalog };
  router.get('/v1/models', requireScope('models:read'), listModels(catalog));
  router.get('/v1/models/*model', requireScope('models:read'), retrieveModel(catalog));
  router.post('/v1/chat/completions', requireScope('chat:completions'), chatCompletions(options));
  router.post('/v1/responses', requireScope('responses:create'), responses(options));
  router.post('/v1/messages', requireScope('messages:create'), messages(options));
  router.post('/v1/messages/count_tokens', requireScope('messages:create'), countTokens(options));
  return router;
}
