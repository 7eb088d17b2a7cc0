import Router from '@koa/router';
import Koa, { type Middleware } from 'koa';
import type { Logger } from 'pino';
import { apiKey } from '../lib/auth/api-key.js';
import { anthropicErrors } from '../lib/errors/anthropic-errors.js';
import { openAIErrors } from '../lib/errors/openai-errors.js';
import type { Deployment } from './deployment.js';
import { healthRouter } from './health.js';
import { requestLog } from './request-log.js';
import { securityHeaders } from './security-headers.js';

/** Runs `middleware` for /v1 and everything under it. */
function underV1(middleware: Middleware): Middleware {
  return async function underV1(ctx, next) {
    if (ctx.path === '/v1' || ctx.path.startsWith('/v1/')) await middleware(ctx, next);
    else await next();
  };
}

/** Shape B errors for POST /v1/messages, inside the Shape A formatter that serves everything else. */
function messagesShape(): Middleware {
  const shapeB = anthropicErrors();
  return async function messagesShape(ctx, next) {
    if (ctx.method === 'POST' && ctx.path === '/v1/messages') await shapeB(ctx, next);
    else await next();
  };
}

/** The /v1 API: every request authenticated first, known or not, then routed. */
function v1Router(_deployment: Deployment): Router {
  return new Router({ prefix: '/v1' });
}

/**
 * The reference server's Koa app: the whole API of api.md composed from lib/ on `deployment`.
 * @example createApp(await openDeployment(loadConfig()), createLogger('info')).listen(8080)
 */
export function createApp(deployment: Deployment, logger: Logger): Koa {
  const app = new Koa();
  app.on('error', (err: unknown, ctx?: Koa.Context) => {
    logger.error({ err, requestId: ctx?.state.requestId ?? null }, 'request failed');
  });
  const health = healthRouter({ checks: deployment.checks });
  const v1 = v1Router(deployment);
  app.use(requestLog(logger));
  app.use(securityHeaders());
  app.use(openAIErrors());
  app.use(health.routes());
  app.use(health.allowedMethods({ throw: true }));
  app.use(messagesShape());
  app.use(underV1(apiKey({ store: deployment.keys })));
  app.use(v1.routes());
  app.use(v1.allowedMethods({ throw: true }));
  return app;
}
