import Koa from 'koa';
import { adminAuth } from '../../lib/admin/admin-auth.js';
import { adminRouter, type AdminChange } from '../../lib/admin/admin-router.js';
import { adminSessions, type AdminSessionsOptions } from '../../lib/admin/admin-sessions.js';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import { apiKey } from '../../lib/auth/api-key.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { MemoryAdminSessionStore } from '../../lib/stores/memory/admin-session-store.js';
import { MemoryAdminTokenStore } from '../../lib/stores/memory/admin-token-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { listen } from './http.js';
import { checkedFetch } from './openapi.js';

/**
 * The admin API composed from lib/ alone, in memory, on a clock the test moves (Unix seconds):
 * admin routes behind adminAuth() with sessions, and `GET /v1/whoami` behind apiKey() on the same
 * clock, answering with the verified key. Every reported change is kept in `changes`. Answers to
 * `admin` and `fetch` are checked against docs/openapi.json: what disagrees is kept in `problems`.
 */
export async function adminApp(options: Pick<AdminSessionsOptions, 'ttlSeconds' | 'secure'> = {}) {
  const clock = { seconds: Math.floor(Date.now() / 1000) };
  const nowMs = () => clock.seconds * 1000;
  const keys = new MemoryKeyStore();
  const tokens = new MemoryAdminTokenStore();
  const sessions = new MemoryAdminSessionStore();
  const changes: AdminChange[] = [];
  const onChange = (change: AdminChange) => changes.push(change);
  const admin = adminRouter({ keys, files: new MemoryFileStore(), catalog: [{ id: 'echo-1' }, { id: 'echo-2' }], onChange, nowMs });
  const session = adminSessions({ sessions, onChange, nowMs, ...options });

  const app = new Koa();
  app.use(openAIErrors());
  const v1 = apiKey({ store: keys, nowMs });
  const auth = adminAuth({ tokens, sessions, nowMs });
  app.use((ctx, next) => (ctx.path.startsWith('/admin/') ? auth(ctx, next) : next()));
  app.use(admin.routes());
  app.use(session.routes());
  app.use((ctx, next) =>
    ctx.path === '/v1/whoami'
      ? v1(ctx, async () => {
          ctx.body = ctx.state.apiKey;
        })
      : next(),
  );
  const server = await listen(app);
  const { token, record } = await createAdminToken(tokens, { prefix: 'kmg' });
  const problems: string[] = [];
  const checked = checkedFetch(problems);
  return {
    url: server.url,
    clock,
    keys,
    tokens,
    sessions,
    changes,
    token,
    tokenId: record.id,
    problems,
    /** `fetch`, its answers checked against docs/openapi.json. */
    fetch: checked,
    /** A call to the admin API with the admin token, JSON in and out. */
    admin: (method: string, path: string, body?: unknown) =>
      checked(`${server.url}/admin/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${token}` },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    /** The status of `GET /v1/whoami` with `key`: 200 while the key is accepted, 401 once it is not. */
    whoami: async (key: string) => (await fetch(`${server.url}/v1/whoami`, { headers: { authorization: `Bearer ${key}` } })).status,
    close: () => server.close(),
  };
}
