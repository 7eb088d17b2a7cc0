import Koa from 'koa';
import Router from '@koa/router';
import { apiKey } from '../../lib/auth/api-key.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { requireScope } from '../../lib/auth/require-scope.js';
import { SCOPES, type Scope } from '../../lib/auth/scopes.js';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import type { ModelLimits } from '../../lib/quota/model-limits.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { underPath } from '../../lib/under-path.js';

/** Every operation of api.md's scope table, as method, path and the scope that guards it. */
export const OPERATIONS: Array<{ method: string; path: string; scope: Scope }> = [
  { method: 'POST', path: '/v1/chat/completions', scope: 'chat:completions' },
  { method: 'POST', path: '/v1/messages', scope: 'messages:create' },
  { method: 'GET', path: '/v1/models', scope: 'models:read' },
  { method: 'POST', path: '/v1/embeddings', scope: 'embeddings:create' },
  { method: 'POST', path: '/v1/files', scope: 'files:write' },
  { method: 'GET', path: '/v1/files', scope: 'files:read' },
  { method: 'GET', path: '/v1/files/file-abc', scope: 'files:read' },
  { method: 'GET', path: '/v1/files/file-abc/content', scope: 'files:read' },
  { method: 'DELETE', path: '/v1/files/file-abc', scope: 'files:delete' },
];

/**
 * A gateway whose handlers only echo the verified key: Shape B on /v1/messages, Shape A elsewhere,
 * every /v1 request authenticated first, each operation behind its scope.
 */
export function authApp(store = new MemoryKeyStore()) {
  const app = new Koa();
  app.use(gatewayErrors());
  app.use(underPath('/v1', apiKey({ store })));
  const router = new Router();
  for (const { method, path, scope } of OPERATIONS) {
    router.register(
      path.replace('file-abc', ':id'),
      [method],
      [
        requireScope(scope),
        (ctx) => {
          ctx.body = { ok: true, key: ctx.state.apiKey };
        },
      ],
    );
  }
  app.use(router.routes());
  app.use(router.allowedMethods());
  const keyFor = (scopes: Scope[] = [...SCOPES], extra: { models?: string[] | null; expiresAt?: number | null; account?: string; limits?: ModelLimits } = {}) =>
    createApiKey(store, {
      prefix: 'kmg',
      account: extra.account ?? 'acme',
      scopes,
      models: extra.models ?? null,
      expiresAt: extra.expiresAt ?? null,
      ...(extra.limits && { limits: extra.limits }),
    });
  return { app, store, keyFor };
}
