import test from 'ava';
import { makePdf } from '../helpers/models-pdf.js';
import { until } from '../helpers/poll.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { createKey, startServer, tempDataDir } from '../helpers/server-process.js';
import { tcpProxy } from '../helpers/server-tcp-proxy.js';
import { POSTGRES_URL, REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';

const cleanups: Array<() => Promise<unknown>> = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const through = (url: string, proxy: { port: number }) => {
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(proxy.port);
  return proxied.toString();
};

// ioredis reconnects with a back-off of up to 2 s; allow far more.
const eventually = <T>(probe: () => Promise<T>, done: (value: T) => boolean) => until(probe, done, { intervalMs: 100, attempts: 150 });

withRedis(withPostgres(test))('/readyz and the API answer 503 while PostgreSQL or Redis is away, and recover', async (t) => {
  const database = await throwawayPostgres();
  cleanups.push(database.drop);
  const data = await tempDataDir();
  cleanups.push(data.remove);
  const postgres = await tcpProxy({ host: new URL(POSTGRES_URL).hostname, port: Number(new URL(POSTGRES_URL).port || 5432) });
  const redis = await tcpProxy({ host: new URL(REDIS_URL).hostname, port: Number(new URL(REDIS_URL).port || 6379) });
  cleanups.push(postgres.close, redis.close);
  const env = { DATA_DIR: data.dir, DATABASE_URL: through(database.url, postgres), REDIS_URL: through(REDIS_URL, redis) };
  const { key } = await createKey(env, ['--account', 'acme']);
  const server = await startServer(env);
  cleanups.push(() => server.stop());
  const headers = { authorization: `Bearer ${key}` };
  const ready = async () => {
    const response = await fetch(`${server.url}/readyz`);
    return { status: response.status, body: (await response.json()) as { checks: Record<string, string> } };
  };
  const uploadStatus = async () => {
    const form = new FormData();
    form.set('purpose', 'user_data');
    form.set('file', new Blob([makePdf(1)]), 'a.pdf');
    const response = await fetch(`${server.url}/v1/files`, { method: 'POST', headers, body: form });
    return { status: response.status, body: (await response.json()) as { error?: { code: string } } };
  };

  t.deepEqual(await ready(), { status: 200, body: { status: 'ok', checks: { database: 'ok', blobs: 'ok', redis: 'ok' } } as never });

  await redis.cut();
  t.deepEqual(await ready(), { status: 503, body: { status: 'unavailable', checks: { database: 'ok', blobs: 'ok', redis: 'unavailable' } } as never });
  const refused = await uploadStatus();
  t.is(refused.status, 503);
  t.is(refused.body.error?.code, 'service_unavailable');
  t.is((await fetch(`${server.url}/v1/files`, { headers })).status, 200, 'reads never touch Redis');
  await redis.restore();
  t.is((await eventually(ready, (value) => value.status === 200)).status, 200);
  t.is((await eventually(uploadStatus, (value) => value.status === 200)).status, 200);

  await postgres.cut();
  t.like(await ready(), { status: 503, body: { checks: { database: 'unavailable', redis: 'ok' } } });
  const down = await fetch(`${server.url}/v1/files`, { headers });
  t.is(down.status, 503);
  t.like(await down.json(), { error: { type: 'server_error', code: 'service_unavailable', message: 'Service temporarily unavailable' } });
  await postgres.restore();
  t.is((await eventually(ready, (value) => value.status === 200)).status, 200);
  t.is((await fetch(`${server.url}/v1/files`, { headers })).status, 200);
});
