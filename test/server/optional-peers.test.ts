import { existsSync } from 'node:fs';
import { readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import knexFactory from 'knex';
import { ConfigError } from '../../reference-server/config-error.js';
import { loadConfigWithModules } from '../../reference-server/config.js';
import { openDeployment } from '../../reference-server/deployment.js';
import { createLogger } from '../../reference-server/logger.js';
import { until } from '../helpers/poll.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { spawnCli, tempDataDir } from '../helpers/server-process.js';
import { POSTGRES_URL, REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';

const dirs: Array<{ remove(): Promise<void> }> = [];
test.after.always(() => Promise.all(dirs.map((dir) => dir.remove())));

async function dataDir() {
  const temp = await tempDataDir();
  dirs.push(temp);
  return temp.dir;
}

/** node's arguments that make `packages` unresolvable in the CLI's process, as if not installed. */
const hiding = (packages: string[]) => ({
  nodeArgs: ['--import', new URL('../helpers/hide-packages.js', import.meta.url).href],
  env: { KMG_TEST_HIDDEN_PACKAGES: packages.join(',') },
});

// An endpoint nobody listens on: the start stops before any span could be sent.
const OTEL = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:18320' };

// Each case: what is not installed, the settings that ask for it, the one line.
const missingPeers: Array<[string, string[], Record<string, string>, string]> = [
  ['METRICS_PORT without prom-client', ['prom-client'], { METRICS_PORT: '0' }, 'METRICS_PORT needs prom-client, not installed: npm install prom-client'],
  ['REDIS_URL without ioredis', ['ioredis'], { REDIS_URL }, 'REDIS_URL needs ioredis, not installed: npm install ioredis'],
  [
    'BLOB_URL of a bucket without the AWS SDK',
    ['@aws-sdk/client-s3', '@aws-sdk/lib-storage'],
    { BLOB_URL: 's3://bucket/files', AWS_REGION: 'us-east-1' },
    'BLOB_URL (S3) needs @aws-sdk/client-s3, @aws-sdk/lib-storage, not installed: npm install @aws-sdk/client-s3 @aws-sdk/lib-storage',
  ],
  [
    'METRICS_PORT and tracing without prom-client and the tracing SDK',
    ['prom-client', '@opentelemetry/sdk-trace-node'],
    { METRICS_PORT: '0', ...OTEL },
    'METRICS_PORT needs prom-client; tracing (OTEL_EXPORTER_OTLP_ENDPOINT) needs @opentelemetry/sdk-trace-node, not installed: npm install prom-client @opentelemetry/sdk-trace-node',
  ],
];

for (const [name, packages, settings, line] of missingPeers) {
  // The process ends by itself (the CLI sets an exit code, it does not call exit): no handle is left open.
  test(`serve with ${name} exits non-zero with one clear line, having opened and created nothing`, async (t) => {
    const dir = await dataDir();
    const { nodeArgs, env } = hiding(packages);
    const result = await spawnCli(['serve'], { DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'silent', ...settings, ...env }, nodeArgs);
    t.is(result.code, 1);
    t.is(result.stderr, `koa-model-gateway: ${line}\n`);
    t.deepEqual(await readdir(dir), [], 'no database, files or uploads directory');
  });
}

withRedis(test)('a start that fails at its last step releases all it opened (Redis, its subscriber, the database, the uploads claim): the process ends by itself', async (t) => {
  const dir = await dataDir();
  // The metrics' module, loaded last, cannot be found: everything else is open by then.
  const { nodeArgs, env } = hiding(['koa-model-gateway/metrics']);
  const result = await spawnCli(['serve'], { DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'silent', METRICS_PORT: '0', REDIS_URL, ...env }, nodeArgs);
  t.is(result.code, 1);
  t.regex(result.stderr, /^koa-model-gateway: unexpected error: [^\n]*koa-model-gateway\/metrics[^\n]*\n$/);
  t.true(existsSync(join(dir, 'gateway.sqlite')), 'the database was opened');
  t.deepEqual(await readdir(join(dir, 'uploads')), [], 'the uploads claim is released');
});

/** The files under `dir` that this process holds open (its worker threads' included). */
async function openFilesUnder(dir: string): Promise<string[]> {
  const targets = await Promise.all((await readdir('/proc/self/fd')).map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => '')));
  return targets.filter((target) => target.startsWith(`${dir}/`));
}

const silent = createLogger('silent', { write: () => undefined });

test('a start that fails after the database opened (Redis unreachable) leaves no SQLite file open', async (t) => {
  const dir = await dataDir();
  const config = await loadConfigWithModules({ DATA_DIR: dir, LOG_LEVEL: 'silent', REDIS_URL: 'redis://127.0.0.1:1' });
  await t.throwsAsync(openDeployment(config, silent), { instanceOf: ConfigError, message: /cannot reach Redis/ });
  t.true(existsSync(join(dir, 'gateway.sqlite')), 'the database was opened');
  t.deepEqual(await openFilesUnder(dir), []);
});

withPostgres(test)('a start that fails after the database opened (Redis unreachable) leaves no PostgreSQL connection open', async (t) => {
  const database = await throwawayPostgres();
  t.teardown(() => database.drop());
  const name = new URL(database.url).pathname.slice(1);
  const config = await loadConfigWithModules({ DATA_DIR: await dataDir(), LOG_LEVEL: 'silent', DATABASE_URL: database.url, REDIS_URL: 'redis://127.0.0.1:1' });
  await t.throwsAsync(openDeployment(config, silent), { instanceOf: ConfigError, message: /cannot reach Redis/ });
  const admin = knexFactory({ client: 'pg', connection: POSTGRES_URL });
  t.teardown(() => admin.destroy());
  const count = async () => Number((await admin.raw<{ rows: Array<{ count: string }> }>('select count(*) from pg_stat_activity where datname = ?', [name])).rows[0]?.count);
  // The server ends a backend just after its client has gone: it may still be listed for a moment.
  t.is(await until(count, (connections) => connections === 0), 0);
});
