import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { modelPairs } from './model-pairs.js';
import { freePort, ROOT, startService, type Service } from './processes.js';
import { LOAD_CORE, SERVER_CORE } from './system.js';

/** The mock provider (bench/servers/mock-upstream.ts), on the load generator's core as the setup has it. */
export async function startMockUpstream(streamEvents: number): Promise<Service> {
  const port = await freePort();
  return startService({
    name: 'mock upstream',
    script: 'bench/servers/mock-upstream.ts',
    env: { PORT: String(port), STREAM_EVENTS: String(streamEvents) },
    core: LOAD_CORE,
    port,
    readyPath: '/healthz',
  });
}

/** Whether the mock holds new streams open after their opening events; `hold: false` also ends every held one. */
export async function configureMock(mock: Service, settings: { hold: boolean }): Promise<void> {
  const response = await fetch(`${mock.url}/mock`, { method: 'PUT', body: JSON.stringify(settings) });
  if (response.status !== 204) throw new Error(`mock upstream: PUT /mock answered ${response.status}`);
}

/**
 * The bare Koa + undici floor (bench/servers/bare-proxy.ts) in front of `upstream`, pinned to the
 * server core: `parse` reads and rewrites the answers (the floor), `pipe` passes them back unparsed.
 */
export async function startBareProxy(upstream: string, models: Record<string, string>, answers: 'parse' | 'pipe' = 'parse'): Promise<Service> {
  const port = await freePort();
  return startService({
    name: `bare Koa + undici (${answers})`,
    script: 'bench/servers/bare-proxy.ts',
    env: {
      PORT: String(port),
      UPSTREAM: upstream,
      MODELS: modelPairs(models),
      FLOOR_ANSWER: answers,
    },
    core: SERVER_CORE,
    port,
    readyPath: '/healthz',
  });
}

/**
 * The floor for a cache hit (bench/servers/hit-floor.ts) in front of `upstream`, pinned to the
 * server core, knowing one key, its log to a pipe.
 */
export async function startHitFloor(upstream: string, models: Record<string, string>, key: string): Promise<Service> {
  const port = await freePort();
  return startService({
    name: 'floor for a hit',
    script: 'bench/servers/hit-floor.ts',
    env: {
      PORT: String(port),
      UPSTREAM: upstream,
      MODELS: modelPairs(models),
      KEY_SHA256: createHash('sha256').update(key).digest('hex'),
    },
    core: SERVER_CORE,
    port,
    readyPath: '/healthz',
    stdoutToPipe: true,
  });
}

/** A stand-in OTLP collector answering 200 (bench/servers/otlp-sink.ts), on the load generator's core. */
export async function startOtlpSink(): Promise<Service> {
  const port = await freePort();
  return startService({ name: 'OTLP sink', script: 'bench/servers/otlp-sink.ts', env: { PORT: String(port) }, core: LOAD_CORE, port, readyPath: '/healthz' });
}

/** Portkey's gateway, the version the issue measured unless BENCH_PORTKEY_VERSION says otherwise. */
export const PORTKEY_VERSION = process.env.BENCH_PORTKEY_VERSION ?? '1.15.2';
// Under node_modules: ignored by git, kept between runs, and never one of the package's dependencies.
const PORTKEY_CACHE = process.env.BENCH_PORTKEY_DIR ?? join(ROOT, 'node_modules', '.cache', 'kmg-bench-portkey');

/** Installs @portkey-ai/gateway into the cache on first use; resolves to its Node server's script. */
async function installPortkey(): Promise<string> {
  const prefix = join(PORTKEY_CACHE, PORTKEY_VERSION);
  const script = join(prefix, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');
  if (existsSync(script)) return script;
  process.stderr.write(`bench: fetching @portkey-ai/gateway@${PORTKEY_VERSION} into ${prefix} (first use)\n`);
  // --ignore-scripts: its one install script runs patch-package, and the published package has no patches.
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  await promisify(execFile)(npm, ['install', '--prefix', prefix, '--ignore-scripts', '--no-audit', '--no-fund', `@portkey-ai/gateway@${PORTKEY_VERSION}`], {
    cwd: ROOT,
  });
  if (!existsSync(script)) throw new Error(`bench: npm installed @portkey-ai/gateway@${PORTKEY_VERSION} but ${script} is not there`);
  return script;
}

/** Portkey's gateway on Node (`start-server.js --headless`), pinned to the server core. */
export async function startPortkey(): Promise<Service> {
  const script = await installPortkey();
  const port = await freePort();
  return startService({
    name: `Portkey ${PORTKEY_VERSION}`,
    script,
    args: [`--port=${port}`, '--headless'],
    env: { PORT: String(port) },
    core: SERVER_CORE,
    port,
    readyPath: '/',
  });
}
