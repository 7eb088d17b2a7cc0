/**
 * A whole gateway in one file, every store in memory: files, models, chat completions and
 * messages, answered by the offline echo provider. Restarting forgets everything.
 *
 *   node --import tsx examples/minimal-gateway.ts
 *
 * In your own project, import from 'koa-model-gateway' and 'koa-model-gateway/stores/memory'.
 */
import Router from '@koa/router';
import Koa from 'koa';
import {
  SCOPES,
  anthropicErrors,
  apiKey,
  chatCompletions,
  createApiKey,
  filesRouter,
  listModels,
  messages,
  MemoryCreationLimiter,
  openAIErrors,
  requireScope,
  type CatalogModel,
  type ProviderConfig,
} from '../lib/index.js';
import { MemoryBlobStore, MemoryFileStore, MemoryKeyStore } from '../lib/stores/memory/index.js';

const keys = new MemoryKeyStore();
const files = new MemoryFileStore();
const blobs = new MemoryBlobStore();
const providers: ProviderConfig[] = [{ id: 'local', kind: 'echo' }];
const catalog: CatalogModel[] = [{ id: 'echo-1', provider: 'local', upstreamModel: 'echo-1', created: 1_744_000_000 }];

const app = new Koa();
// Shape A errors and an X-Request-Id on every response.
app.use(openAIErrors());

// POST /v1/messages answers in Anthropic's shape, its authentication included.
const anthropic = new Router();
anthropic.post('/v1/messages', anthropicErrors(), apiKey({ store: keys }), requireScope('messages:create'), messages({ catalog, providers, files, blobs }));
app.use(anthropic.routes());

app.use(apiKey({ store: keys }));
const fileEndpoints = filesRouter({ files, blobs, limiter: new MemoryCreationLimiter() });
const models = new Router();
models.get('/v1/models', requireScope('models:read'), listModels({ catalog }));
models.post('/v1/chat/completions', requireScope('chat:completions'), chatCompletions({ catalog, providers, files, blobs }));
for (const router of [fileEndpoints, models]) app.use(router.routes()).use(router.allowedMethods());

const { key } = await createApiKey(keys, { prefix: 'kmg', account: 'demo', scopes: [...SCOPES] });
const server = app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 3000;
  console.log(`Listening on http://127.0.0.1:${port}`);
  console.log(`API key: ${key}`);
});
