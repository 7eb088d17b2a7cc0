import Router from '@koa/router';
import Koa, { type Middleware } from 'koa';
import type { Logger } from 'pino';
import { apiKey } from '../lib/auth/api-key.js';
import { requireScope } from '../lib/auth/require-scope.js';
import { anthropicErrors } from '../lib/errors/anthropic-errors.js';
import { openAIErrors } from '../lib/errors/openai-errors.js';
import { filesRouter } from '../lib/files/files-router.js';
import { chatCompletions } from '../lib/models/chat-completions.js';
import { listModels } from '../lib/models/list-models.js';
import { messages } from '../lib/models/messages.js';
import type { Deployment } from './deployment.js';
import { healthRouter } from './health.js';
import { requestLog } from './request-log.js';
import { securityHeaders } from './security-headers.js';

/** Runs `middleware` for /v1 and everything under it. */
function underV1(middleware: Middleware): Middleware {
  return function underV1(ctx, next) {
    const { path } = ctx.request;
    return path === '/v1' || path.startsWith('/v1/') ? middleware(ctx, next) : next();
  };
}

/**
 * Shape B errors for /v1/messages, whatever the method (every response there carries request-id),
 * inside the Shape A formatter that serves everything else.
 */
function messagesShape(): Middleware {
  const shapeB = anthropicErrors();
  return function messagesShape(ctx, next) {
    return ctx.request.path === '/v1/messages' ? shapeB(ctx, next) : next();
  };
}

/** `GET /v1/models`, `POST /v1/chat/completions` and `POST /v1/messages`, each behind its scope. */
function modelsRouter(deployment: Deployment): Router {
  const { files, blobs } = deployment;
  const { models: catalog, providers } = deployment.config.gateway;
  // Exact paths, as underV1() and messagesShape() compare them: `/V1/models` is no route here.
  const router = new Router({ sensitive: true, strict: true });
  router.get('/v1/models', requireScope('models:read'), listModels({ catalog }));
  router.post('/v1/chat/completions', requireScope('chat:completions'), chatCompletions({ catalog, providers, files, blobs }));
  router.post('/v1/messages', requireScope('messages:create'), messages({ catalog, providers, files, blobs }));
  return router;
}

/**
 * The reference server's Koa app: the whole API of api.md composed from lib/ on `deployment`.
 * @example
 * const config = loadConfig();
 * const logger = createLogger(config.logLevel);
 * createApp(await openDeployment(config, logger), logger).listen(config.port, config.host);
 */
export function createApp(deployment: Deployment, logger: Logger): Koa {
  const app = new Koa();
  app.on('error', (err: unknown, ctx?: Koa.Context) => {
    const requestId = ctx?.state.requestId ?? null;
    // A client that hangs up mid-request is no server failure: its request line says 499.
    if (ctx?.req.socket.destroyed && !ctx.res.writableFinished) logger.debug({ err, requestId }, 'client went away');
    else logger.error({ err, requestId }, 'request failed');
  });
  const health = healthRouter({ checks: deployment.checks });
  const { limits } = deployment.config.gateway;
  const files = filesRouter({
    files: deployment.files,
    blobs: deployment.blobs,
    limiter: deployment.limiter,
    limits: { maxFileBytes: limits.maxFileBytes, maxFiles: limits.maxFiles, maxStoredBytes: limits.maxStoredBytes },
    tempDir: deployment.tempDir,
  });
  const models = modelsRouter(deployment);
  app.use(requestLog(logger));
  app.use(securityHeaders());
  app.use(openAIErrors());
  app.use(messagesShape());
  // Every /v1 request is authenticated first, whether or not its route exists.
  app.use(underV1(apiKey({ store: deployment.keys })));
  // The API's routers first: a probe of /healthz may pass a router more, an API request may not.
  for (const router of [files, models, health]) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  return app;
}
