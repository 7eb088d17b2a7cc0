import Koa from 'koa';
import type { Logger } from 'pino';
import { apiKey, gatewayErrors, underPath } from 'koa-model-gateway';
import { filesRouter } from 'koa-model-gateway/files';
import { modelsRouter } from 'koa-model-gateway/models';
import { adminApi } from './admin.js';
import { dashboardRouter } from './dashboard.js';
import type { Deployment } from './deployment.js';
import { healthRouter } from './health.js';
import { logAppError } from './logger.js';
import { mcpEndpoint } from './mcp.js';
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
  app.on('error', logAppError(logger, deployment.outages));
  const health = healthRouter({ checks: deployment.checks });
  const { limits } = deployment.config.gateway;
  const { tracing } = deployment;
  // With traces on, each call to a store or limiter of a request is a span of its own.
  const traced = <Store extends object>(store: Store, name: string) => (tracing ? tracing.traced(store, name) : store);
  const fileStore = traced(deployment.files, 'FileStore');
  const blobs = traced(deployment.blobs, 'BlobStore');
  const files = filesRouter({
    files: fileStore,
    blobs,
    creationLimiter: traced(deployment.creationLimiter, 'CreationLimiter'),
    limits: { maxFileBytes: limits.maxFileBytes, maxFiles: limits.maxFiles, maxStoredBytes: limits.maxStoredBytes },
    tempDir: deployment.tempDir,
    nowMs: deployment.nowMs,
  });
  const { metrics } = deployment;
  const { routing } = deployment.config.gateway;
  const models = modelsRouter({
    catalog: deployment.catalog,
    providers: deployment.providers,
    files: fileStore,
    blobs,
    modelLimiter: traced(deployment.modelLimiter, 'ModelLimiter'),
    modelLimits: deployment.config.gateway.modelLimits,
    ...(deployment.config.gateway.upstreamTimeoutMs !== undefined && { timeoutMs: deployment.config.gateway.upstreamTimeoutMs }),
    ...(deployment.config.gateway.upstreamMaxBytes !== undefined && { maxUpstreamBytes: deployment.config.gateway.upstreamMaxBytes }),
    budgets: deployment.budgets,
    routing: { ...routing, cooldown: { ...routing.cooldown, store: traced(deployment.cooldowns, 'CooldownStore') } },
    cache: { store: traced(deployment.responseCache, 'ResponseCache') },
    usageRecorder: deployment.usageRecorder,
    ...(metrics && { metrics: metrics.metrics }),
    nowMs: deployment.nowMs,
  });
  const admin = adminApi(deployment, logger);
  // First: the request's span covers everything, and its trace id is there for the log line.
  if (tracing) app.use(tracing.requests);
  if (metrics) app.use(metrics.requests);
  app.use(requestLog(logger));
  app.use(securityHeaders());
  app.use(gatewayErrors());
  // Uploads are under /v1/files: every other request, model calls first, passes without its frame.
  if (metrics) app.use(underPath('/v1/files', metrics.uploads));
  // Every /v1 and /admin/v1 request is authenticated first, whether or not its route exists;
  // each with its own credentials, neither of which opens the other.
  app.use(underPath('/v1', apiKey({ store: traced(deployment.keys, 'KeyStore'), uses: deployment.keyUses, nowMs: deployment.nowMs })));
  const mcp = mcpEndpoint(deployment, logger, traced);
  // /mcp, with MCP servers configured: the same keys, their own scope (mcp:call) and grants.
  if (mcp) app.use(underPath('/mcp', apiKey({ store: traced(deployment.keys, 'KeyStore'), uses: deployment.keyUses, nowMs: deployment.nowMs })));
  // The audit trail first: it records, once the answer is made, what a session's opening (the
  // OIDC provider's sign-in, which needs no credential) or an authenticated request did.
  app.use(underPath('/admin/v1', admin.audit));
  if (admin.signIn) app.use(admin.signIn.routes());
  for (const auth of admin.auth) app.use(underPath('/admin/v1', auth));
  // The API's routers first: a probe of /healthz may pass a router more, an API request may not.
  // The models router before the files router: a model call, the hot path, matches no other
  // router's routes (their paths are apart, so the order changes no answer).
  for (const router of [models, ...(mcp ? [mcp] : []), files, ...admin.routers, dashboardRouter(logger), health, openApiRouter()]) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  return app;
}
