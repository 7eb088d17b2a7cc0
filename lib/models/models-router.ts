import Router from '@koa/router';
import { requireScope } from '../auth/require-scope.js';
import { endpointCatalogOptions } from './catalog.js';
import { chatCompletions } from './chat-completions.js';
import { listModels } from './list-models.js';
import { messages } from './messages.js';
import type { ModelEndpointOptions } from './model-endpoint.js';

/**
 * The models API, each endpoint behind its scope: `GET /v1/models` (`models:read`),
 * `POST /v1/chat/completions` (`chat:completions`) and `POST /v1/messages` (`messages:create`),
 * on one catalog and one set of providers. Mount it behind `gatewayErrors()` (Shape B on
 * /v1/messages) and `underPath('/v1', apiKey(...))`, with its `allowedMethods()`, as `filesRouter()`.
 * Paths match exactly (case-sensitive, no trailing slash).
 * @example
 * const models = modelsRouter({ catalog: [{ id: 'echo-1', provider: 'echo' }], providers: [echoProvider({ id: 'echo' })] });
 * app.use(models.routes()).use(models.allowedMethods());
 */
export function modelsRouter(options: ModelEndpointOptions): Router {
  // Checked here too, so that a bad catalog is named as this factory's option.
  endpointCatalogOptions(options, 'modelsRouter()');
  const router = new Router({ sensitive: true, strict: true });
  router.get('/v1/models', requireScope('models:read'), listModels({ catalog: options.catalog }));
  router.post('/v1/chat/completions', requireScope('chat:completions'), chatCompletions(options));
  router.post('/v1/messages', requireScope('messages:create'), messages(options));
  return router;
}
