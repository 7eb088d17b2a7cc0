import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { ExecutionContext } from 'ava';
import { runCommandLine } from '../../reference-server/commands/index.js';
import { type DatabaseSettings, loadConfigWithModules, parseDatabaseUrl } from '../../reference-server/config.js';
import { createLogger } from '../../reference-server/logger.js';
import { startGateway, type GatewayOptions } from '../../reference-server/server.js';
import { seedMigratedDatabase } from './migrated-databases.js';

/** The checkout's root, where ava runs every test file: the CLI runs from there, as a user runs it. */
export const ROOT = process.cwd();
/** The compiled CLI (`npm run build`), as the package ships it: what tests about processes run. */
export const COMPILED_CLI = join(ROOT, 'dist/reference-server/cli.js');
const GATEWAY_VARS = [
  'PORT',
  'HOST',
  'DATA_DIR',
  'DATABASE_URL',
  'REDIS_URL',
  'FILES_DIR',
  'GATEWAY_CONFIG',
  'LOG_LEVEL',
  'SHUTDOWN_GRACE_SECONDS',
  'METRICS_PORT',
  'USAGE_RETENTION_DAYS',
  'USAGE_ROLLUP_RETENTION_DAYS',
];
// What the SDK would read from the environment, and the bucket settings.
const S3_VARS = [
  'BLOB_URL',
  'S3_ENDPOINT',
  'S3_FORCE_PATH_STYLE',
  'AWS_REGION',
  'AWS_DEFAULT_REGION',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_PROFILE',
];

/** The test process's environment without any gateway setting, plus `env`. */
function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base = { ...process.env };
  for (const name of [...GATEWAY_VARS, ...S3_VARS]) delete base[name];
  return { ...base, ...env };
}

async function newestMtime(dir: string): Promise<number> {
  const entries = await readdir(join(ROOT, dir), { recursive: true, withFileTypes: true });
  const times = await Promise.all(entries.filter((entry) => entry.isFile()).map(async (entry) => (await stat(join(entry.parentPath, entry.name))).mtimeMs));
  return Math.max(...times);
}

let compiledChecked: Promise<void> | undefined;

/** The compiled CLI's path, once it is known to be built from the sources as they are. */
export async function compiledCli(): Promise<string> {
  compiledChecked ??= (async () => {
    const built = await stat(COMPILED_CLI).then(
      (file) => file.mtimeMs,
      () => 0,
    );
    const sources = Math.max(await newestMtime('lib'), await newestMtime('reference-server'));
    if (built < sources) throw new Error('dist/ is missing or older than lib/ and reference-server/: run `npm run build:tests` (npm test does)');
  })();
  await compiledChecked;
  return COMPILED_CLI;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `koa-model-gateway <args>` to completion, in this process, with only `env` as its environment. */
export async function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await runCommandLine(args, { env, out: (text) => (stdout += `${text}\n`), err: (text) => (stderr += `${text}\n`) });
  return { code, stdout, stderr };
}

/** Runs the compiled `koa-model-gateway <args>` in a process of its own, to completion; `nodeArgs` go to node before the CLI. */
export async function spawnCli(args: string[], env: Record<string, string>, nodeArgs: string[] = []): Promise<CliResult> {
  const child = spawn(process.execPath, [...nodeArgs, await compiledCli(), ...args], { cwd: ROOT, env: childEnv(env) });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, stdout, stderr };
}

export interface CreatedKey {
  id: string;
  key: string;
  account: string;
  scopes: string[];
  models: string[] | null;
  cache: { ttl_seconds: number; per_key: boolean } | null;
}

/**
 * A migrated database where the server or CLI of `env` would make a new one (migrated-databases.ts):
 * tests that start servers are not about migrating. A DATABASE_URL the server refuses is left to it.
 */
async function seedDatabase(env: Record<string, string>): Promise<void> {
  if (env.DATA_DIR === undefined) return;
  let settings: DatabaseSettings;
  try {
    settings = parseDatabaseUrl(env.DATABASE_URL, env.DATA_DIR);
  } catch {
    return;
  }
  await seedMigratedDatabase(settings);
}

/** `keys create --json` with `args`; fails loudly when the CLI does. */
export async function createKey(env: Record<string, string>, args: string[]): Promise<CreatedKey> {
  await seedDatabase(env);
  const result = await runCli(['keys', 'create', '--json', ...args], env);
  if (result.code !== 0) throw new Error(`keys create failed (${result.code}): ${result.stderr}`);
  return JSON.parse(result.stdout) as CreatedKey;
}

export interface LogLine {
  msg: string;
  [field: string]: unknown;
}

/** A reference server that tests talk to over HTTP. */
export interface RunningServer {
  url: string;
  /** Every JSON log line so far. */
  logs: LogLine[];
  /** Graceful shutdown; resolves with the exit code (0 for a server in this process that stopped). */
  stop(): Promise<number | null>;
}

/**
 * A clock for servers that count calls or creations per clock minute: real time, but started at
 * the beginning of the current minute, so that a test shorter than a minute never straddles two.
 * Servers that share limits share one such clock.
 */
export function minuteAlignedClock(): () => number {
  const startedAt = Date.now();
  const minuteStart = startedAt - (startedAt % 60_000);
  return () => minuteStart + (Date.now() - startedAt);
}

/** `koa-model-gateway serve` in this process, on a random port, with only `env` as its environment (and its config's `providerModules`). */
export async function startServer(env: Record<string, string>, options: GatewayOptions = {}): Promise<RunningServer> {
  const config = await loadConfigWithModules({ PORT: '0', LOG_LEVEL: 'info', ...env });
  await seedMigratedDatabase(config.database);
  const logs: LogLine[] = [];
  const logger = createLogger(config.logLevel, { write: (line: string) => void logs.push(JSON.parse(line) as LogLine) });
  const gateway = await startGateway(config, logger, options);
  return { url: gateway.url, logs, stop: () => gateway.stop().then(() => 0) };
}

export interface ServerProcess extends RunningServer {
  child: ChildProcess;
  stderr(): string;
  /** Resolves with the exit code when the process has ended. */
  exited: Promise<number | null>;
}

/**
 * How long a server may take to log `listening` before the test gives up on it: a start that hangs
 * fails its test rather than the run. Run from its sources, a start compiles every module through
 * tsx: 3 s of CPU, which took more than 30 s once, with the suite's other files on both cores.
 */
const START_BOUND_MS = 55_000;

/**
 * How many server processes of a test file start at once; the others wait their turn, and their
 * bound starts with it. A file whose tests each spawn a server (lifecycle starts a dozen at once)
 * would otherwise have them all compile their modules together, on a busy machine past the bound.
 */
const STARTS_AT_ONCE = 2;
let starting = 0;
const waitingToStart: Array<() => void> = [];

/** Resolves once this process may start a server; call the function it resolves with once it has started or failed. */
async function turnToStart(): Promise<() => void> {
  while (starting >= STARTS_AT_ONCE) await new Promise<void>((resolve) => waitingToStart.push(resolve));
  starting += 1;
  let done = false;
  return () => {
    if (done) return;
    done = true;
    starting -= 1;
    waitingToStart.shift()?.();
  };
}

/** `npm run gateway`'s command line: the CLI run from its TypeScript sources through tsx. */
const FROM_SOURCE = ['--conditions=@koa-model-gateway/source', '--import', 'tsx', join(ROOT, 'reference-server/cli.ts')];

/**
 * The compiled `koa-model-gateway serve` in a process of its own, on a random port; resolves when
 * it logs `listening`. With `fromSource`, the CLI runs from its sources as `npm run gateway` runs it.
 */
export async function spawnServer(env: Record<string, string>, options: { fromSource?: boolean } = {}): Promise<ServerProcess> {
  const cli = options.fromSource ? FROM_SOURCE : [await compiledCli()];
  await seedDatabase(env);
  const started = await turnToStart();
  const child = spawn(process.execPath, [...cli, 'serve'], {
    cwd: ROOT,
    env: childEnv({ PORT: '0', LOG_LEVEL: 'info', ...env }),
  });
  const logs: LogLine[] = [];
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  void exited.then(started);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the server did not start within ${START_BOUND_MS / 1000} s: ${stderr}`));
    }, START_BOUND_MS);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code}) before listening: ${stderr}`));
    });
    createInterface({ input: child.stdout }).on('line', (line) => {
      let entry: LogLine;
      try {
        entry = JSON.parse(line) as LogLine;
      } catch {
        return;
      }
      logs.push(entry);
      if (entry.msg === 'listening') {
        clearTimeout(timer);
        started();
        resolve({
          url: entry.url as string,
          child,
          logs,
          stderr: () => stderr,
          exited,
          stop: () => {
            child.kill('SIGTERM');
            return exited;
          },
        });
      }
    });
  });
}

/** Every file under `<dataDir>/uploads`: upload temp files, in the servers' own directories and beside them. */
export async function uploadFiles(dataDir: string): Promise<string[]> {
  const entries = await readdir(join(dataDir, 'uploads'), { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
}

/** A temp directory for DATA_DIR; `remove` deletes it. */
export async function tempDataDir(): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-server-'));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * A server on a fresh data dir, with one key of `account` made through the CLI; the server is
 * stopped and the directory removed when the test ends.
 */
export async function serverWithKey(t: ExecutionContext, account: string): Promise<{ env: { DATA_DIR: string }; key: string; server: RunningServer }> {
  const temp = await tempDataDir();
  t.teardown(() => temp.remove());
  const env = { DATA_DIR: join(temp.dir, 'data') };
  const { key } = await createKey(env, ['--account', account]);
  const server = await startServer(env);
  t.teardown(() => server.stop());
  return { env, key, server };
}
