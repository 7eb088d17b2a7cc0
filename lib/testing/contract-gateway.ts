import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { apiKey } from '../auth/api-key.js';
import { createApiKey } from '../auth/keys.js';
import { SCOPES } from '../auth/scopes.js';
import { gatewayErrors } from '../errors/gateway-errors.js';
import { modelsRouter } from '../models/models-router.js';
import type { ModelRequestState } from '../state.js';
import type { Provider } from '../models/provider.js';
import { MemoryKeyStore } from '../stores/memory/key-store.js';

/** The catalog id the contract's clients ask for, and the name its upstream must be asked for. */
export const CATALOG_MODEL = 'contract-model';
export const UPSTREAM_MODEL = 'upstream-model-4e1b';
const KEY_PREFIX = 'kmgc';

/** A gateway in front of one provider, as the contract suite's clients reach it. */
export interface ContractGateway {
  url: string;
  /** The client's gateway key, and its secret part (what must never reach an upstream, whole or in part). */
  key: string;
  secret: string;
  /** What the model handlers recorded of each call that reached them (tokens, once it ended). */
  calls: ModelRequestState[];
  close(): Promise<void>;
}

/**
 * `modelsRouter()` behind `gatewayErrors()` and `apiKey()`, over memory stores, on a loopback
 * port, serving `CATALOG_MODEL` through `provider` in one attempt per call, the upstream's silence bounded by `timeoutMs`,
 * and the whole answer (a stream's start) by `timeoutMs` too, or by `budgetMs` when given.
 */
export async function contractGateway(provider: Provider, timeoutMs: number, budgetMs?: number): Promise<ContractGateway> {
  const keys = new MemoryKeyStore();
  const { key } = await createApiKey(keys, { prefix: KEY_PREFIX, account: 'contract', scopes: [...SCOPES] });
  // One attempt per call: the suite checks what the provider does with each, not the routing around it.
  const router = modelsRouter({
    catalog: [{ id: CATALOG_MODEL, provider: provider.id, upstreamModel: UPSTREAM_MODEL }],
    providers: [provider],
    timeoutMs,
    routing: { maxAttempts: 1, ...(budgetMs !== undefined && { budgetMs }) },
  });
  const calls: ModelRequestState[] = [];
  const app = new Koa();
  // The failures the suite provokes are reported here: kept quiet.
  app.on('error', () => undefined);
  app.use(gatewayErrors());
  app.use(async function recordCall(ctx, next) {
    await next();
    if (ctx.state.modelRequest) calls.push(ctx.state.modelRequest);
  });
  app.use(apiKey({ store: keys }));
  app.use(router.routes());
  const server = app.listen(0, '127.0.0.1');
  // As mockUpstream's: idle connections close when the client closes them, never as it reuses one.
  server.keepAliveTimeout = 0;
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    key,
    secret: key.slice(`${KEY_PREFIX}_sk_`.length),
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
