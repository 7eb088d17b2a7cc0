import Koa from 'koa';
import type { Logger } from 'pino';
import { apiKey, filesRouter, gatewayErrors, modelsRouter, underPath } from 'koa-model-gateway';
import { adminApi } from './admin.js';
import { dashboardRouter } from './dashboard.js';
import type { Deployment } from './deployment.js';
import { healthRouter } from './health.js';
import { logAppError } from './logger.js';
import { openApiRouter } from './openapi.js';
import { requestLog } from './request-log.js';
import { securityHeaders } from './security-headers.js';

/**
 * The reference server's Koa app: the whole API of api.md composed from lib/ on `deployment`,
 * every model call metered (a usage record, the metrics when they are on) and limited per key.
 * @example
 * const config = loadConfig();
 * const logger = createLogger(config.logLevel);
 * createApp(await openDeployment(config, logger), logger).listen(config.port, config.host);
 */
export function createApp(deployment: Deployment, logger: Logger): Koa {
  const app = new Koa();
  app.on('error', logAppError(logger));
  const health = healthRouter({ checks: deployment.checks });
  const { limits } = deployment.config.gateway;
  const files = filesRouter({
    files: deployment.files,
    blobs: deployment.blobs,
    limiter: deployment.limiter,
    limits: { maxFileBytes: limits.maxFileBytes, maxFiles: limits.maxFiles, maxStoredBytes: limits.maxStoredBytes },
    tempDir: deployment.tempDir,
  });
  const { metrics } = deployment;
  const models = modelsRouter({
    catalog: deployment.catalog,
    providers: deployment.providers,
    files: deployment.files,
    blobs: deployment.blobs,
    limiter: deployment.modelLimiter,
    modelLimits: deployment.config.gateway.modelLimits,
    budgets: deployment.budgets,
    usage: deployment.usage,
    ...(metrics && { metrics: metrics.metrics }),
  });
  const admin = adminApi(deployment, logger);
  if (metrics) app.use(metrics.requests);
  app.use(requestLog(logger));
  app.use(securityHeaders());
  app.use(gatewayErrors());
  if (metrics) app.use(metrics.uploads);
  // Every /v1 and /admin/v1 request is authenticated first, whether or not its route exists;
  // each with its own credentials, neither of which opens the other.
  app.use(underPath('/v1', apiKey({ store: deployment.keys })));
  app.use(underPath('/admin/v1', admin.auth));
  // The API's routers first: a probe of /healthz may pass a router more, an API request may not.
  for (const router of [files, models, ...admin.routers, dashboardRouter(logger), health, openApiRouter()]) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  return app;
}
