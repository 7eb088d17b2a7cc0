import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { createApp } from './app.js';
import { ConfigError } from './config-error.js';
import type { ServerConfig } from './config.js';
import { openDeployment, sweepDeployment } from './deployment.js';
import { createHttpServer } from './http-server.js';
import { listenMetrics } from './metrics.js';
import { startSweeper } from './sweeper.js';

/** A gateway started by `startGateway`. */
export interface RunningGateway {
  /** Where the API listens, as `http://host:port`. */
  readonly url: string;
  /**
   * Shuts down gracefully: stops accepting connections, lets in-flight requests finish (up to
   * `config.shutdownGraceSeconds`; then their connections are closed), then writes the usage
   * records still waiting and closes the pools and the metrics listener, for one more grace period
   * at most (a stalled database: a warning, and the stores are left as they are). `reason` goes into
   * the log line that says so. Resolves once everything is closed or given up; a second call
   * resolves with the first.
   */
  stop(reason?: Record<string, unknown>): Promise<void>;
}

export interface GatewayOptions {
  /** The deployment's clock (`Deployment.nowMs`): limits, budgets, usage records, expiry, the admin API's days and months. Default: `Date.now`. */
  nowMs?: () => number;
}

/**
 * Opens the deployment `config` describes and serves the API (and, with METRICS_PORT, the
 * metrics) until `stop()`. Resolves once it listens; a port in use is a `ConfigError`.
 */
export async function startGateway(config: ServerConfig, logger: Logger, options: GatewayOptions = {}): Promise<RunningGateway> {
  const deployment = await openDeployment(config, logger, options);
  const handle = createApp(deployment, logger).callback();

  const inFlight = new Set<ServerResponse>();
  // The middleware chains still running: an aborted upload removes its temp file in its own time.
  const handlers = new Set<Promise<void>>();
  let draining = false;
  const server = createHttpServer((req, res) => {
    // A response that ends after shutdown began tells the client not to reuse the connection.
    if (draining) res.setHeader('Connection', 'close');
    inFlight.add(res);
    res.once('close', () => inFlight.delete(res));
    const handled = handle(req, res).finally(() => handlers.delete(handled));
    handlers.add(handled);
  }, logger);
  server.listen(config.port, config.host);
  try {
    await once(server, 'listening');
  } catch (err) {
    await deployment.close();
    throw new ConfigError(`cannot listen on ${config.host}:${config.port} (${(err as NodeJS.ErrnoException).code})`);
  }
  const { address, port } = server.address() as AddressInfo;
  const url = `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
  const closeMetrics = deployment.metrics
    ? await listenMetrics(deployment.metrics, config, logger).catch(async (err: unknown) => {
        server.close();
        await deployment.close();
        throw err;
      })
    : undefined;
  logger.info({ url, database: config.database.client, redis: config.redisUrl !== null }, 'listening');

  const { intervalSeconds } = config.gateway.sweep;
  const sweeper = intervalSeconds > 0 ? startSweeper(() => sweepDeployment(config, deployment), intervalSeconds, logger) : undefined;

  async function shutDown(reason: Record<string, unknown>): Promise<void> {
    logger.info({ ...reason, inFlight: inFlight.size }, 'shutting down');
    draining = true;
    const sweepStopped = sweeper?.stop();
    for (const res of inFlight) if (!res.headersSent) res.setHeader('Connection', 'close');
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const deadline = setTimeout(() => {
      logger.warn({ inFlight: inFlight.size }, 'shutdown grace period over: closing remaining connections');
      server.closeAllConnections();
    }, config.shutdownGraceSeconds * 1000);
    await closed;
    clearTimeout(deadline);
    // Handlers whose connection was cut end quickly; one that does not may not hold the exit up.
    await Promise.race([Promise.allSettled(handlers), delay(5000, undefined, { ref: false })]);
    await sweepStopped;
    // The stores write what waits (the last usage records) and close: a store that stalls may hold
    // the exit up one more grace period, no longer.
    const graceMs = config.shutdownGraceSeconds * 1000;
    const storesClosed = await Promise.race([deployment.close().then(() => true), delay(graceMs, false, { ref: false })]);
    if (!storesClosed) logger.warn({ graceSeconds: config.shutdownGraceSeconds }, 'the stores did not close within the grace period: stopping without them');
    await closeMetrics?.();
    logger.info('stopped');
  }
  let stopped: Promise<void> | undefined;
  return { url, stop: (reason = {}) => (stopped ??= shutDown(reason)) };
}
