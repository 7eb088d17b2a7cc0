import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { createApiKey } from '../../lib/auth/keys.js';
import { SCOPES, type Scope } from '../../lib/auth/scopes.js';
import type { ModelLimits } from '../../lib/quota/model-limits.js';
import { createApp } from '../../reference-server/app.js';
import { loadConfig, type ServerConfig } from '../../reference-server/config.js';
import { openDeployment, type Deployment } from '../../reference-server/deployment.js';
import { createHttpServer } from '../../reference-server/http-server.js';
import { listen } from './http.js';
import { seedMigratedDatabase } from './migrated-databases.js';
import { until } from './poll.js';

export interface LogLine {
  msg: string;
  level: number;
  [field: string]: unknown;
}

export interface ReferenceApp {
  url: string;
  config: ServerConfig;
  deployment: Deployment;
  /** Every JSON line the app's logger wrote so far. */
  logs: LogLine[];
  /** A new key of `account` (default: every scope, no allowlist, no limits of its own). */
  keyFor(scopes?: readonly Scope[], extra?: { account?: string; models?: string[] | null; limits?: ModelLimits }): Promise<string>;
  /** Resolves once the app has finished every request it started (an aborted one included). */
  idle(): Promise<void>;
  /** The first log line `find` accepts, once the app has written it (a request's line follows its response). */
  logLine(find: (line: LogLine) => boolean): Promise<LogLine>;
  close(): Promise<void>;
}

/**
 * The reference server's own app (createApp on openDeployment, in createHttpServer, as `serve`
 * builds it) in this process: the embedded default deployment (SQLite, files on disk, limits in
 * memory) in a temp DATA_DIR, with the default echo catalog and the spec's limits, or the
 * `GATEWAY_CONFIG` file `gatewayConfig` describes, and its log lines collected; `extraEnv` adds to
 * the environment (DATABASE_URL and REDIS_URL for the other deployment); `nowMs` is the
 * deployment's clock (`openDeployment`'s); `port` where it listens (default: any free one). Cheaper than a child process, and the same composition.
 */
export async function referenceApp(
  gatewayConfig?: Record<string, unknown>,
  extraEnv: Record<string, string> = {},
  { nowMs, port }: { nowMs?: () => number; port?: number } = {},
): Promise<ReferenceApp> {
  const dataDir = await mkdtemp(join(tmpdir(), 'kmg-spec-'));
  const env: Record<string, string> = { ...extraEnv, DATA_DIR: dataDir };
  if (gatewayConfig !== undefined) {
    env.GATEWAY_CONFIG = join(dataDir, 'config.json');
    await writeFile(env.GATEWAY_CONFIG, JSON.stringify(gatewayConfig));
  }
  const config = loadConfig(env);
  await seedMigratedDatabase(config.database);
  const logs: LogLine[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') logs.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  const logger = pino({ level: 'info' }, sink);
  const deployment = await openDeployment(config, logger, nowMs ? { nowMs } : {});
  const handle = createApp(deployment, logger).callback();
  let inFlight = 0;
  const waiting: (() => void)[] = [];
  const server = await listen(
    createHttpServer((req, res) => {
      inFlight += 1;
      void handle(req, res).finally(() => {
        inFlight -= 1;
        if (inFlight === 0) for (const resolve of waiting.splice(0)) resolve();
      });
    }, logger),
    port,
  );
  return {
    url: server.url,
    config,
    deployment,
    logs,
    keyFor: async (scopes = SCOPES, extra = {}) =>
      (
        await createApiKey(deployment.keys, {
          prefix: config.gateway.keyPrefix,
          account: extra.account ?? 'acme',
          scopes: [...scopes],
          models: extra.models ?? null,
          ...(extra.limits && { limits: extra.limits }),
        })
      ).key,
    idle: () => (inFlight === 0 ? Promise.resolve() : new Promise((resolve) => waiting.push(resolve))),
    async logLine(find) {
      const found = await until(
        async () => logs.find(find),
        (line) => line !== undefined,
        { intervalMs: 25, attempts: 200 },
      );
      if (found === undefined) throw new Error('no such log line within 5 s');
      return found;
    },
    async close() {
      await server.close();
      await deployment.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
