import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import knexFactory, { type Knex } from 'knex';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import { KnexAdminTokenStore } from '../../lib/stores/knex/admin-token-store.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { runCli, spawnServer, startServer, tempDataDir, type RunningServer } from '../helpers/server-process.js';
import { REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';

// A key revoked or rotated in one server process, or by the CLI, is refused by every process
// (this test's, and one of its own) within a second, while each process keeps its key cache (keyCacheSeconds: 5 by default, so a
// cache that is not told would accept the key for up to five seconds more).

const LIMIT_MS = 1000;

interface Deployment {
  env: Record<string, string>;
  /** Knex settings for the servers' database, to make the admin token there. */
  database: Knex.Config;
  cleanup(): Promise<void>;
}

/** An admin token made in the servers' database (the CLI's own command is tested in cli.test.ts). */
async function adminToken(database: Knex.Config): Promise<string> {
  const knex = knexFactory(database);
  try {
    return (await createAdminToken(new KnexAdminTokenStore(knex), { prefix: 'kmg' })).token;
  } finally {
    await knex.destroy();
  }
}

const status = async (server: RunningServer, key: string) =>
  (await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status;

/** Asserts that every server refuses `key` within LIMIT_MS of `since` (asking until it does, or that time has passed). */
async function refusedWithin(t: ExecutionContext, servers: RunningServer[], key: string, since: number): Promise<void> {
  const refused = await Promise.all(
    servers.map(async (server) => {
      for (;;) {
        if ((await status(server, key)) === 401) return true;
        if (performance.now() - since > LIMIT_MS) return false;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }),
  );
  t.deepEqual(refused, servers.map(() => true), `refused by each server within ${LIMIT_MS} ms`);
}

async function twoServers(t: ExecutionContext, deployment: Deployment) {
  t.teardown(() => deployment.cleanup());
  const servers = await Promise.all([startServer(deployment.env), spawnServer(deployment.env)]);
  t.teardown(() => Promise.all(servers.map((server) => server.stop())));
  const token = await adminToken(deployment.database);
  const admin = async (server: RunningServer, method: string, path: string, body?: unknown) => {
    const response = await fetch(`${server.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${token}` },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as { id: string; key: string };
  };
  /** A new key, already accepted (and so cached) by both servers. */
  const cachedKey = async () => {
    const created = await admin(servers[1] as RunningServer, 'POST', '/keys', { account: 'acme' });
    for (const server of servers) t.is(await status(server, created.key), 200);
    return created;
  };
  return { servers, admin, cachedKey };
}

async function revocationAcrossProcesses(t: ExecutionContext, deployment: Deployment) {
  const { servers, admin, cachedKey } = await twoServers(t, deployment);
  const [first] = servers as [RunningServer, RunningServer];

  const revoked = await cachedKey();
  await admin(first, 'POST', `/keys/${revoked.id}/revoke`);
  await refusedWithin(t, servers, revoked.key, performance.now());

  const rotated = await cachedKey();
  const replacement = await admin(first, 'POST', `/keys/${rotated.id}/rotate`, { grace_seconds: 0 });
  await refusedWithin(t, servers, rotated.key, performance.now());
  for (const server of servers) t.is(await status(server, replacement.key), 200);

  const byCli = await cachedKey();
  const cli = await runCli(['keys', 'revoke', byCli.id], deployment.env);
  t.is(cli.code, 0, cli.stderr);
  t.is(cli.stderr, '');
  await refusedWithin(t, servers, byCli.key, performance.now());
}

test('SQLite: two server processes refuse a key revoked or rotated in one of them, or by the CLI, within a second', async (t) => {
  const data = await tempDataDir();
  const dataDir = join(data.dir, 'data');
  await revocationAcrossProcesses(t, {
    env: { DATA_DIR: dataDir },
    database: { client: 'better-sqlite3', connection: { filename: join(dataDir, 'gateway.sqlite') }, useNullAsDefault: true },
    cleanup: () => data.remove(),
  });
});

withRedis(withPostgres(test))(
  'PostgreSQL + Redis: two server processes refuse a key revoked or rotated in one of them, or by the CLI, within a second',
  async (t) => {
    const [data, database] = await Promise.all([tempDataDir(), throwawayPostgres()]);
    await revocationAcrossProcesses(t, {
      env: { DATA_DIR: data.dir, DATABASE_URL: database.url, REDIS_URL },
      database: { client: 'pg', connection: database.url },
      async cleanup() {
        await database.drop();
        await data.remove();
      },
    });
  },
);
