import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pinned } from './system.js';

/** The checkout's root: every process runs from there, as a user runs it. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * How the measured servers run: `build` (default) compiles lib/, reference-server/ and the bench
 * servers with tsc first and runs the JavaScript, as an installed package runs; `tsx` runs the
 * TypeScript sources through tsx (its loader thread adds about 35 MiB of memory and start-up time).
 */
export const RUNTIME: 'build' | 'tsx' = process.env.BENCH_RUNTIME === 'tsx' ? 'tsx' : 'build';
// Under node_modules: ignored by git, and the compiled files still find the dependencies.
const BUILD_DIR = join(ROOT, 'node_modules', '.cache', 'kmg-bench');

/** The condition under which the package's own name resolves to its TypeScript sources (package.json "exports"). */
const SOURCE_CONDITION = '--conditions=@koa-model-gateway/source';

let built: Promise<void> | undefined;

/**
 * The build's package.json: the package's name and exports pointing into the build, so that
 * `import 'koa-model-gateway'` in the compiled reference server finds the compiled lib/ beside it,
 * as it finds dist/ in an installed package (node_modules is a package boundary: the checkout's
 * package.json does not count there).
 */
function writeBuildManifest(): void {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; exports: Record<string, unknown> };
  mkdirSync(BUILD_DIR, { recursive: true });
  const exports = Object.fromEntries(
    Object.entries(manifest.exports).flatMap(([path, target]) => {
      if (typeof target === 'object' && target !== null && 'default' in target) return [[path, String(target.default).replace('./dist/', './')]];
      // A file shipped as it is (the OpenAPI document): copied beside the build, at the same path.
      if (typeof target !== 'string' || target === './package.json') return [];
      mkdirSync(dirname(join(BUILD_DIR, target)), { recursive: true });
      copyFileSync(join(ROOT, target), join(BUILD_DIR, target));
      return [[path, target]];
    }),
  );
  writeFileSync(join(BUILD_DIR, 'package.json'), `${JSON.stringify({ name: manifest.name, type: 'module', exports }, null, 2)}\n`);
}

/**
 * Compiles what the servers run (once per process), unless they run under tsx. Type errors do
 * not stop the bench (tsc still emits; typechecking is `npm run typecheck`'s job): they are printed.
 */
export function prepareRuntime(): Promise<void> {
  // BENCH_REBUILD=0 measures the last build as it is (for trying a change in the compiled output).
  if (RUNTIME === 'tsx') return Promise.resolve();
  writeBuildManifest();
  if (process.env.BENCH_REBUILD === '0' && existsSync(join(BUILD_DIR, 'reference-server', 'cli.js'))) return Promise.resolve();
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  built ??= promisify(execFile)(process.execPath, [tsc, '-p', 'bench/tsconfig.json', '--outDir', BUILD_DIR], { cwd: ROOT }).then(
    () => undefined,
    (err: { code?: unknown; stdout?: string }) => {
      // Exit code 2: errors found, output emitted anyway.
      if (err.code !== 2 || !existsSync(join(BUILD_DIR, 'reference-server', 'cli.js')))
        throw new Error(`tsc -p bench/tsconfig.json failed:\n${err.stdout ?? String(err)}`);
      process.stderr.write(`bench: type errors in the sources (measuring what tsc emitted anyway):\n${err.stdout ?? ''}\n`);
    },
  );
  return built;
}

/** The reference server's CLI as the package's own build leaves it (`npm run build`): what a user runs. */
export const DIST_CLI = join(ROOT, 'dist', 'reference-server', 'cli.js');

let distBuilt: Promise<void> | undefined;

/**
 * Compiles lib/ and reference-server/ into dist/ as `npm run build` does (`tsc -p
 * tsconfig.build.json`; the dashboard's bundle, which the API does not need, is left out), once per
 * process. BENCH_REBUILD=0 measures dist/ as it is.
 */
export function prepareDist(): Promise<void> {
  if (process.env.BENCH_REBUILD === '0' && existsSync(DIST_CLI)) return Promise.resolve();
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  distBuilt ??= promisify(execFile)(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: ROOT }).then(
    () => undefined,
    (err: { stdout?: string }) => {
      throw new Error(`tsc -p tsconfig.build.json failed:\n${err.stdout ?? String(err)}`);
    },
  );
  return distBuilt;
}

/**
 * The node command line running `script` with `preloads` and `flags`: a .ts path from the root,
 * or an absolute path to JavaScript (dist/, another gateway), run as it is, without preloads.
 */
function nodeArgs(script: string, preloads: string[] = [], flags: string[] = []): string[] {
  if (isAbsolute(script)) return [process.execPath, ...flags, script];
  const compiled = (path: string) => join(BUILD_DIR, path.replace(/\.ts$/, '.js'));
  if (RUNTIME === 'tsx')
    return [process.execPath, ...flags, SOURCE_CONDITION, '--import', 'tsx', ...preloads.flatMap((path) => ['--import', `./${path}`]), script];
  return [process.execPath, ...flags, ...preloads.flatMap((path) => ['--import', pathToFileURL(compiled(path)).href]), compiled(script)];
}

const running = new Set<ChildProcess>();
// A bench that throws or is interrupted leaves nothing running behind it.
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const child of running) child.kill('SIGKILL');
    process.exit(130);
  });
}

export interface Service {
  name: string;
  pid: number;
  url: string;
  /** What it wrote on stderr so far. */
  stderr(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
  stop(graceMs?: number): Promise<void>;
}

/** A free loopback port (there is a small race until the service binds it; fine on a bench machine). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

async function waitUntilAnswering(url: string, child: ChildProcess, stderr: () => string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${url}: the process exited (${child.exitCode ?? child.signalCode}): ${stderr()}`);
    }
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await response.arrayBuffer();
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`${url} did not answer within ${timeoutMs} ms: ${stderr()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

export interface StartOptions {
  name: string;
  /** The script, a .ts path from the checkout's root (or an absolute path to a .js file), and its arguments. */
  script: string;
  args?: string[];
  env: Record<string, string>;
  core: number;
  port: number;
  /** A path on the service that answers once it is ready. */
  readyPath: string;
  /** Modules (.ts paths from the root) loaded before the script, with --import. */
  preloads?: string[];
  /** Extra node flags (e.g. --cpu-prof). */
  nodeFlags?: string[];
  /** Its stdout to a pipe this process drains, as a user's log collector reads it; default: /dev/null. */
  stdoutToPipe?: boolean;
}

/**
 * Starts a node service on `core` (stdout discarded unless `stdoutToPipe`) and resolves once
 * `readyPath` answers.
 */
export async function startService(options: StartOptions): Promise<Service> {
  await prepareRuntime();
  const [command, ...args] = pinned(options.core, [...nodeArgs(options.script, options.preloads, options.nodeFlags), ...(options.args ?? [])]);
  const child = spawn(command as string, args, {
    cwd: ROOT,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', options.stdoutToPipe ? 'pipe' : 'ignore', 'pipe'],
  });
  running.add(child);
  child.stdout?.resume();
  const exited = once(child, 'exit').then(() => running.delete(child));
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-20_000)));
  const url = `http://127.0.0.1:${options.port}`;
  const service: Service = {
    name: options.name,
    pid: child.pid as number,
    url,
    stderr: () => stderr,
    async stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
  try {
    await waitUntilAnswering(`${url}${options.readyPath}`, child, () => stderr, 60_000);
  } catch (err) {
    await service.stop(1000);
    throw err;
  }
  return service;
}

/** Runs a script (a .ts path from the root, or an absolute path to a .js file) to completion and returns its stdout; throws on a non-zero exit. */
export async function runScript(script: string, args: string[], env: Record<string, string>): Promise<string> {
  await prepareRuntime();
  const [command, ...rest] = nodeArgs(script);
  const child = spawn(command as string, [...rest, ...args], { cwd: ROOT, env: { ...process.env, ...env } });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const [code] = (await once(child, 'close')) as [number | null];
  running.delete(child);
  if (code !== 0) throw new Error(`${script} ${args.join(' ')} exited ${code}: ${stderr}`);
  return stdout;
}

/** Whether the module at `moduleUrl` is the script node was asked to run (not imported by bench/all.ts). */
export function isMain(moduleUrl: string): boolean {
  return process.argv[1] !== undefined && moduleUrl === pathToFileURL(resolve(process.argv[1])).href;
}
