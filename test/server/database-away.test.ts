import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { runCommand } from '../../reference-server/commands/index.js';
import { mockProviders } from '../helpers/models-upstream.js';
import { until } from '../helpers/poll.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { startServer, tempDataDir } from '../helpers/server-process.js';
import { tcpProxy } from '../helpers/server-tcp-proxy.js';
import { POSTGRES_URL, REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';

// docs/DEPLOYMENT.md's rows for PostgreSQL: refused, every request that needs it (a key's lookup,
// a file record) answers 503 at once; stalled, within the stores' bound (5 s); all recovers by itself.

/** The stores' bound (`timeoutMs` of the Knex stores, the reference server's default). */
const DATABASE_BOUND_MS = 5000;
/** What a request may take beyond it on a shared, busy machine. */
const SLACK_MS = 4000;

const cleanups: Array<() => Promise<unknown>> = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function cli(env: Record<string, string>, args: string[]): Promise<{ key: string }> {
  const out: string[] = [];
  const code = await runCommand([...args, '--json'], { env, out: (text) => out.push(text), err: () => undefined });
  if (code !== 0) throw new Error(`${args.join(' ')} exited ${code}`);
  return JSON.parse(out.join('\n')) as { key: string };
}

withRedis(withPostgres(test))('PostgreSQL refused or stalled: a file list and a model call answer 503 within the bound, and all recovers', async (t) => {
  t.timeout(4 * (DATABASE_BOUND_MS + SLACK_MS), 'requests held while the database stalls');
  const [upstream, data, database, postgres] = await Promise.all([
    mockProviders(),
    tempDataDir(),
    throwawayPostgres(),
    tcpProxy({ host: new URL(POSTGRES_URL).hostname, port: Number(new URL(POSTGRES_URL).port || 5432) }),
  ]);
  cleanups.push(() => upstream.close(), data.remove, database.drop, postgres.close);
  const config = join(data.dir, 'gateway.json');
  await writeFile(
    config,
    JSON.stringify({
      providers: [{ id: 'mock-openai', kind: 'openai', baseURL: `${upstream.url}/v1` }],
      models: [{ id: 'gpt-mock', provider: 'mock-openai', upstreamModel: 'gpt-upstream-1' }],
      // No key read before the fault answers from the cache.
      keyCacheSeconds: 0,
      sweep: { intervalSeconds: 0 },
    }),
  );
  const proxied = new URL(database.url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(postgres.port);
  const env = { DATA_DIR: data.dir, DATABASE_URL: proxied.toString(), REDIS_URL, GATEWAY_CONFIG: config };
  const key = (await cli(env, ['keys', 'create', '--account', 'acme'])).key;
  const server = await startServer(env);
  cleanups.push(() => server.stop());

  const timed = async (send: () => Promise<Response>) => {
    const started = performance.now();
    const response = await send();
    const body = (await response.json()) as { error?: { code: string } };
    return { status: response.status, code: body.error?.code, ms: performance.now() - started };
  };
  const chat = (key: string) => () =>
    fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-mock', messages: [{ role: 'user', content: 'hi' }] }),
    });
  const list = () => fetch(`${server.url}/v1/files`, { headers: { authorization: `Bearer ${key}` } });

  t.like(await timed(chat(key)), { status: 200 });
  for (const fault of ['cut', 'stall'] as const) {
    if (fault === 'cut') await postgres.cut();
    else postgres.stall();
    const bound = fault === 'cut' ? SLACK_MS : DATABASE_BOUND_MS + SLACK_MS;
    for (const answer of await Promise.all([timed(list), timed(chat(key))])) {
      t.like(answer, { status: 503, code: 'service_unavailable' }, fault);
      t.true(answer.ms < bound, `${fault}: answered after ${Math.round(answer.ms)} ms`);
    }
    t.is((await fetch(`${server.url}/healthz`)).status, 200, `${fault}: the process still runs`);
    if (fault === 'cut') await postgres.restore();
    else postgres.resume();
    t.like(await until(() => timed(list), (answer) => answer.status === 200, { intervalMs: 100, attempts: 150 }), { status: 200 }, `${fault}: recovered`);
  }
});
