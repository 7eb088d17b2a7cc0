import Router from '@koa/router';

/** A readiness probe: resolves when the backing service answers. */
export type ReadinessCheck = () => Promise<unknown>;

export interface HealthOptions {
  /** Named probes; `/readyz` is 200 only when every one resolves within `timeoutMs`. */
  checks: Readonly<Record<string, ReadinessCheck>>;
  /** Default: 2000. */
  timeoutMs?: number;
}

async function probe(check: ReadinessCheck, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([check().then(() => true), timeout]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `GET /healthz`: 200 while the process runs. `GET /readyz`: 200 when every check answers, else
 * 503 naming the ones that did not. Neither needs a key.
 * @example app.use(healthRouter({ checks: { database: () => knex.raw('select 1') } }).routes())
 */
export function healthRouter(options: HealthOptions): Router {
  const { checks } = options;
  const timeoutMs = options.timeoutMs ?? 2000;
  const router = new Router({ sensitive: true, strict: true });
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
    const names = Object.keys(checks);
    const results = await Promise.all(names.map((name) => probe(checks[name] as ReadinessCheck, timeoutMs)));
    const ready = results.every(Boolean);
    ctx.status = ready ? 200 : 503;
    ctx.body = {
      status: ready ? 'ok' : 'unavailable',
      checks: Object.fromEntries(names.map((name, i) => [name, results[i] ? 'ok' : 'unavailable'])),
    };
  });
  return router;
}
