import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { newFileId } from '../../lib/files/file-id.js';
import { DIST_CLI, freePort, prepareDist, runScript, startService, type Service } from './processes.js';
import { SERVER_CORE } from './system.js';

/** PostgreSQL and Redis the benches use; a throwaway database is created beside the one named here. */
export const POSTGRES_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

export type DatabaseKind = 'sqlite' | 'postgres';

export interface DeploymentOptions {
  database: DatabaseKind;
  /** Limits on Redis instead of in memory. */
  redis?: boolean;
  /** Over the spec's limits (e.g. to let one account upload 20 files at once). */
  limits?: Record<string, number>;
  /** More keys of the GATEWAY_CONFIG file (`providers`, `models`, ...). */
  config?: Record<string, unknown>;
  /**
   * Run the CLI as a user does: `node dist/reference-server/cli.js` from the package's own build
   * (`prepareDist`), its request log written to a pipe. Default: the bench's build, log to /dev/null.
   */
  asUser?: boolean;
}

/**
 * The data of one reference-server deployment: a temp DATA_DIR, and for PostgreSQL a database of
 * its own, dropped by `destroy`. Servers started on it share it, as processes of one deployment do.
 */
export interface Deployment {
  env: Record<string, string>;
  /** Knex on the deployment's database, for seeding. Opened on first use. */
  knex(): Knex;
  /** `keys create --account <account> --json [options]` through the CLI, as a user creates a key. */
  createKey(account: string, options?: string[]): Promise<{ id: string; key: string }>;
  /** Any other CLI command on the deployment (`usage --json`); resolves to its stdout. */
  cli(args: string[]): Promise<string>;
  /** `koa-model-gateway serve`, pinned to the server core; resolves once /healthz answers. With BENCH_PROFILE, profiled. */
  serve(options?: { preloads?: string[]; nodeFlags?: string[]; env?: Record<string, string> }): Promise<Service>;
  destroy(): Promise<void>;
}

/** With BENCH_PROFILE=<dir>, every gateway writes a CPU profile there when it stops (`node --cpu-prof`). */
function profileFlags(): string[] {
  const dir = process.env.BENCH_PROFILE;
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
}

/** BENCH_GATEWAY_FLAGS: Node flags for every gateway (not bare Koa), space-separated. */
function gatewayFlags(): string[] {
  return (process.env.BENCH_GATEWAY_FLAGS ?? '').split(' ').filter(Boolean);
}

function databaseUrl(name: string): string {
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Creates the deployment's data: the data dir, the config file, the PostgreSQL database. */
export async function createDeployment(options: DeploymentOptions): Promise<Deployment> {
  const dataDir = await mkdtemp(join(tmpdir(), 'kmg-bench-'));
  const configPath = join(dataDir, 'gateway.json');
  // No sweep while measuring: it would add work that is not the request's.
  await writeFile(configPath, JSON.stringify({ ...options.config, limits: options.limits ?? {}, sweep: { intervalSeconds: 0 } }));
  const env: Record<string, string> = { DATA_DIR: dataDir, GATEWAY_CONFIG: configPath, LOG_LEVEL: 'info' };

  let admin: Knex | undefined;
  let databaseName: string | undefined;
  if (options.database === 'postgres') {
    databaseName = `kmg_bench_${randomBytes(6).toString('hex')}`;
    admin = knexFactory({ client: 'pg', connection: { connectionString: POSTGRES_URL, connectionTimeoutMillis: 5000 }, pool: { min: 0, max: 1 } });
    try {
      await admin.raw('create database ??', [databaseName]);
    } catch (err) {
      await admin.destroy();
      await rm(dataDir, { recursive: true, force: true });
      throw new Error(`bench: cannot create a database with ${POSTGRES_URL} (set BENCH_DATABASE_URL): ${(err as Error).message}`, { cause: err });
    }
    env.DATABASE_URL = databaseUrl(databaseName);
  }
  if (options.redis) env.REDIS_URL = REDIS_URL;

  let knex: Knex | undefined;
  const services: Service[] = [];
  if (options.asUser) await prepareDist();
  const cliScript = options.asUser ? DIST_CLI : 'reference-server/cli.ts';
  return {
    env,
    knex() {
      knex ??=
        options.database === 'postgres'
          ? knexFactory({ client: 'pg', connection: env.DATABASE_URL as string, pool: { min: 0, max: 2 } })
          : knexFactory({ client: 'better-sqlite3', connection: { filename: join(dataDir, 'gateway.sqlite') }, useNullAsDefault: true });
      return knex;
    },
    async createKey(account, keyOptions = []) {
      const out = await runScript(cliScript, ['keys', 'create', '--account', account, '--json', ...keyOptions], env);
      return JSON.parse(out) as { id: string; key: string };
    },
    cli: (args) => runScript(cliScript, args, env),
    async serve(serveOptions = {}) {
      const port = await freePort();
      const service = await startService({
        name: `gateway (${options.database}${options.redis ? ', redis' : ''})`,
        script: cliScript,
        args: ['serve'],
        stdoutToPipe: options.asUser === true,
        env: { ...env, ...serveOptions.env, PORT: String(port), HOST: '127.0.0.1' },
        core: SERVER_CORE,
        port,
        readyPath: '/healthz',
        ...(serveOptions.preloads ? { preloads: serveOptions.preloads } : {}),
        nodeFlags: [...profileFlags(), ...gatewayFlags(), ...(serveOptions.nodeFlags ?? [])],
      });
      services.push(service);
      return service;
    },
    async destroy() {
      await Promise.all(services.map((service) => service.stop()));
      await knex?.destroy();
      if (admin && databaseName) {
        await admin.raw('drop database if exists ?? with (force)', [databaseName]);
        await admin.destroy();
      }
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** The bare Koa baseline (bench/servers/bare-koa.ts), pinned to the server core. */
export async function startBareKoa(uploadDir = ''): Promise<Service> {
  const port = await freePort();
  return startService({
    name: 'bare Koa',
    script: 'bench/servers/bare-koa.ts',
    env: { PORT: String(port), UPLOAD_DIR: uploadDir },
    core: SERVER_CORE,
    port,
    readyPath: '/healthz',
  });
}

/**
 * Puts `count` file records of `account` straight into the deployment's database, as
 * KnexFileStore writes them (table kmg_files), one second apart, newest now. Far faster than
 * uploading them, and the listing reads only these rows. Returns the ids, oldest first.
 */
export async function seedFiles(knex: Knex, account: string, count: number): Promise<string[]> {
  const now = Math.floor(Date.now() / 1000);
  const rows = Array.from({ length: count }, (_, index) => {
    const createdAt = now - count + index + 1;
    return { id: newFileId(createdAt), account, filename: `document-${index}.pdf`, bytes: 1_000_000 + index, created_at: createdAt, expires_at: null };
  });
  await knex.batchInsert('kmg_files', rows, 500);
  return rows.map((row) => row.id);
}
