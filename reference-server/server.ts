import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { createApp } from './app.js';
import { ConfigError } from './config-error.js';
import type { ServerConfig } from './config.js';
import { sweep } from '../lib/files/sweep.js';
import { openDeployment } from './deployment.js';
import { startSweeper } from './sweeper.js';

export interface ServeOptions {
  /** How long in-flight requests may take to finish after SIGTERM/SIGINT. Default: 30 s. */
  shutdownGraceMs?: number;
}

/**
 * Serves the API until SIGTERM or SIGINT, then shuts down gracefully: stops accepting
 * connections, lets in-flight requests finish (up to `shutdownGraceMs`), then closes the pools.
 * Resolves once everything is closed.
 */
export async function serve(config: ServerConfig, logger: Logger, options: ServeOptions = {}): Promise<void> {
  const shutdownGraceMs = options.shutdownGraceMs ?? 30_000;
  const deployment = await openDeployment(config, logger);
  const handle = createApp(deployment, logger).callback();

  const inFlight = new Set<ServerResponse>();
  let draining = false;
  const server = createServer((req, res) => {
    // A response that ends after shutdown began tells the client not to reuse the connection.
    if (draining) res.shouldKeepAlive = false;
    inFlight.add(res);
    res.once('close', () => inFlight.delete(res));
    void handle(req, res);
  });
  server.listen(config.port, config.host);
  try {
    await once(server, 'listening');
  } catch (err) {
    await deployment.close();
    throw new ConfigError(`cannot listen on ${config.host}:${config.port} (${(err as NodeJS.ErrnoException).code})`);
  }
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  logger.info({ url: `http://${host}:${port}`, database: config.database.client, redis: config.redisUrl !== null }, 'listening');

  const { intervalSeconds, orphanGraceSeconds } = config.gateway.sweep;
  const sweeper =
    intervalSeconds > 0
      ? startSweeper(() => sweep({ files: deployment.files, blobs: deployment.blobs, orphanGraceSeconds }), intervalSeconds, logger)
      : undefined;

  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  logger.info({ signal, inFlight: inFlight.size }, 'shutting down');
  // A second signal means "now".
  const forceExit = () => process.exit(1);
  process.once('SIGTERM', forceExit);
  process.once('SIGINT', forceExit);

  draining = true;
  const sweepStopped = sweeper?.stop();
  for (const res of inFlight) if (!res.headersSent) res.shouldKeepAlive = false;
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const deadline = setTimeout(() => {
    logger.warn({ inFlight: inFlight.size }, 'shutdown grace period over: closing remaining connections');
    server.closeAllConnections();
  }, shutdownGraceMs);
  await closed;
  clearTimeout(deadline);
  await sweepStopped;
  await deployment.close();
  logger.info('stopped');
}
