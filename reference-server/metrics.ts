import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa, { type Middleware } from 'koa';
import type { GatewayMetrics } from 'koa-model-gateway/metrics';
import type { Logger } from 'pino';
import { ConfigError } from './config-error.js';
import type { ServerConfig } from './config.js';

/** The metrics of one server process, and the middleware that feeds them. */
export interface ServerMetrics {
  metrics: GatewayMetrics;
  /** `httpMetrics()`: first in the chain. */
  requests: Middleware;
  /** `uploadMetrics()`: after the error formatter, before the files router. */
  uploads: Middleware;
  /** The app of the metrics listener: `GET /metrics`, no key. */
  app: Koa;
}

/** The metrics when METRICS_PORT asks for them, else null; prom-client is loaded only then. */
export async function openMetrics(config: Pick<ServerConfig, 'metricsPort'>): Promise<ServerMetrics | null> {
  if (config.metricsPort === null) return null;
  const { createGatewayMetrics, httpMetrics, serveMetrics, uploadMetrics } = await import('koa-model-gateway/metrics');
  const metrics = createGatewayMetrics();
  return { metrics, requests: httpMetrics({ metrics }), uploads: uploadMetrics({ metrics }), app: new Koa().use(serveMetrics({ metrics })) };
}

/**
 * Serves the metrics on a listener of its own, on HOST and METRICS_PORT (0: any free port), and
 * logs its address. Resolves with the function that closes it.
 */
export async function listenMetrics(
  serverMetrics: ServerMetrics,
  config: Pick<ServerConfig, 'host' | 'metricsPort'>,
  logger: Logger,
): Promise<() => Promise<void>> {
  const server = createServer(serverMetrics.app.callback());
  server.listen(config.metricsPort ?? 0, config.host);
  try {
    await once(server, 'listening');
  } catch (err) {
    throw new ConfigError(`METRICS_PORT: cannot listen on ${config.host}:${config.metricsPort} (${(err as NodeJS.ErrnoException).code})`);
  }
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  logger.info({ url: `http://${host}:${port}/metrics` }, 'metrics listening');
  return () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
}
