import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { runCommand } from '../../reference-server/commands/index.js';
import { makePdf } from '../helpers/models-pdf.js';
import { mockProviders } from '../helpers/models-upstream.js';
import { startServer, tempDataDir } from '../helpers/server-process.js';
import { until } from '../helpers/poll.js';
import { tcpProxy } from '../helpers/server-tcp-proxy.js';
import { REDIS_URL, withRedis } from '../helpers/services.js';

// docs/DEPLOYMENT.md's row for Redis: with Redis refusing or silent, the calls of a key with model
// limits and the uploads answer 503 within the limiters' bound (500 ms); the calls of a key
// without limits and every read answer 200.

/** The limiters' bound (`timeoutMs` of the Redis limiters). */
const REDIS_BOUND_MS = 500;
/** What a request may take beyond it on a shared, busy machine. */
const SLACK_MS = 4500;

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

withRedis(test)('Redis refused or silent: a limited key\'s model call and an upload answer 503 within the bound; an unlimited key\'s call and reads answer 200', async (t) => {
  const [upstream, data, redis] = await Promise.all([
    mockProviders(),
    tempDataDir(),
    tcpProxy({ host: new URL(REDIS_URL).hostname, port: Number(new URL(REDIS_URL).port || 6379) }),
  ]);
  cleanups.push(() => upstream.close(), data.remove, redis.close);
  const config = join(data.dir, 'gateway.json');
  await writeFile(
    config,
    JSON.stringify({
      providers: [{ id: 'mock-openai', kind: 'openai', baseURL: `${upstream.url}/v1` }],
      models: [{ id: 'gpt-mock', provider: 'mock-openai', upstreamModel: 'gpt-upstream-1' }],
      sweep: { intervalSeconds: 0 },
    }),
  );
  const proxied = new URL(REDIS_URL);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(redis.port);
  const env = { DATA_DIR: data.dir, REDIS_URL: proxied.toString(), GATEWAY_CONFIG: config };
  const limited = (await cli(env, ['keys', 'create', '--account', 'limited', '--rpm', '100'])).key;
  const unlimited = (await cli(env, ['keys', 'create', '--account', 'unlimited'])).key;
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
  const upload = () => {
    const form = new FormData();
    form.set('purpose', 'user_data');
    form.set('file', new Blob([makePdf(1)]), 'a.pdf');
    return fetch(`${server.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${unlimited}` }, body: form });
  };
  const list = () => fetch(`${server.url}/v1/files`, { headers: { authorization: `Bearer ${unlimited}` } });

  t.like(await timed(chat(limited)), { status: 200 });
  for (const fault of ['cut', 'stall'] as const) {
    if (fault === 'cut') await redis.cut();
    else redis.stall();
    for (const answer of [await timed(chat(limited)), await timed(upload)]) {
      t.like(answer, { status: 503, code: 'service_unavailable' }, fault);
      t.true(answer.ms < REDIS_BOUND_MS + SLACK_MS, `${fault}: answered after ${Math.round(answer.ms)} ms`);
    }
    t.like(await timed(chat(unlimited)), { status: 200 }, fault);
    t.like(await timed(list), { status: 200 }, fault);
    if (fault === 'cut') await redis.restore();
    else redis.resume();
    // ioredis reconnects with a back-off of up to 2 s.
    t.like(await until(() => timed(chat(limited)), (answer) => answer.status === 200, { intervalMs: 100, attempts: 150 }), { status: 200 }, `${fault}: recovered`);
  }
});
