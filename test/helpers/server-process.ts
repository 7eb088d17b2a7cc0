import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { ExecutionContext } from 'ava';

/** The checkout's root: the CLI runs from there, as a user runs it. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/**
 * Node's flags for running the TypeScript sources: tsx, and the export condition under which the
 * package's own name (`koa-model-gateway`, as reference-server/ imports it) resolves to lib/'s sources.
 */
export const TSX = ['--conditions=@koa-model-gateway/source', '--import', 'tsx'];
const CLI = [...TSX, 'reference-server/cli.ts'];
const GATEWAY_VARS = ['PORT', 'HOST', 'DATA_DIR', 'DATABASE_URL', 'REDIS_URL', 'FILES_DIR', 'GATEWAY_CONFIG', 'LOG_LEVEL', 'SHUTDOWN_GRACE_SECONDS', 'METRICS_PORT'];
// What the SDK would read from the environment, and the bucket settings.
const S3_VARS = ['BLOB_URL', 'S3_ENDPOINT', 'S3_FORCE_PATH_STYLE', 'AWS_REGION', 'AWS_DEFAULT_REGION', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE'];

/** The test process's environment without any gateway setting, plus `env`. */
function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base = { ...process.env };
  for (const name of [...GATEWAY_VARS, ...S3_VARS]) delete base[name];
  return { ...base, ...env };
}

// Each CLI run is a Node process compiling TypeScript: a few at a time keeps a small machine responsive.
const MAX_CLI_RUNS = 3;
let cliRuns = 0;
const waiting: Array<() => void> = [];

async function cliSlot<T>(run: () => Promise<T>): Promise<T> {
  if (cliRuns >= MAX_CLI_RUNS) await new Promise<void>((resolve) => waiting.push(resolve));
  cliRuns += 1;
  try {
    return await run();
  } finally {
    cliRuns -= 1;
    waiting.shift()?.();
  }
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `koa-model-gateway <args>` to completion. */
export function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return cliSlot(() => new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CLI, ...args], { cwd: ROOT, env: childEnv(env) });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  }));
}

export interface CreatedKey {
  id: string;
  key: string;
  account: string;
  scopes: string[];
  models: string[] | null;
}

/** `keys create --json` with `args`; fails loudly when the CLI does. */
export async function createKey(env: Record<string, string>, args: string[]): Promise<CreatedKey> {
  const result = await runCli(['keys', 'create', '--json', ...args], env);
  if (result.code !== 0) throw new Error(`keys create failed (${result.code}): ${result.stderr}`);
  return JSON.parse(result.stdout) as CreatedKey;
}

export interface LogLine {
  msg: string;
  [field: string]: unknown;
}

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  /** Every JSON log line so far. */
  logs: LogLine[];
  stderr(): string;
  /** Resolves with the exit code when the process has ended. */
  exited: Promise<number | null>;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/** `koa-model-gateway serve` on a random port; resolves when it logs `listening`. */
export function startServer(env: Record<string, string>): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...CLI, 'serve'], {
    cwd: ROOT,
    env: childEnv({ PORT: '0', LOG_LEVEL: 'info', ...env }),
  });
  const logs: LogLine[] = [];
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the server did not start within 30 s: ${stderr}`));
    }, 30_000);
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
export async function serverWithKey(t: ExecutionContext, account: string): Promise<{ env: { DATA_DIR: string }; key: string; server: ServerProcess }> {
  const temp = await tempDataDir();
  t.teardown(() => temp.remove());
  const env = { DATA_DIR: join(temp.dir, 'data') };
  const { key } = await createKey(env, ['--account', account]);
  const server = await startServer(env);
  t.teardown(() => server.stop());
  return { env, key, server };
}
