/**
 * A whole gateway in one file, every store in memory: files, models, chat completions and
 * messages, answered by the offline echo provider. Restarting forgets everything.
 *
 *   node --conditions=@koa-model-gateway/source --import tsx examples/minimal-gateway.ts
 *
 */
import Koa from 'koa';
import { apiKey, gatewayErrors, underPath } from 'koa-model-gateway';
import { SCOPES, createApiKey } from 'koa-model-gateway/auth';
import { filesRouter } from 'koa-model-gateway/files';
import { echoProvider, modelsRouter } from 'koa-model-gateway/models';
import { MemoryBlobStore, MemoryCreationLimiter, MemoryFileStore, MemoryKeyStore } from 'koa-model-gateway/stores/memory';

const keys = new MemoryKeyStore();
const files = new MemoryFileStore();
const blobs = new MemoryBlobStore();

const app = new Koa();
// Errors in Anthropic's shape (request-id) under /v1/messages, OpenAI's (X-Request-Id) elsewhere.
app.use(gatewayErrors());
// Every request under /v1 needs a key, whether or not its route exists.
app.use(underPath('/v1', apiKey({ store: keys })));
const fileEndpoints = filesRouter({ files, blobs, creationLimiter: new MemoryCreationLimiter() });
const models = modelsRouter({
  catalog: [{ id: 'echo-1', provider: 'echo' }],
  providers: [echoProvider({ id: 'echo' })],
  files,
  blobs,
});
for (const router of [fileEndpoints, models]) app.use(router.routes()).use(router.allowedMethods());

const { key } = await createApiKey(keys, { prefix: 'kmg', account: 'demo', scopes: [...SCOPES] });
const server = app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 3000;
  console.log(`Listening on http://127.0.0.1:${port}`);
  console.log(`API key: ${key}`);
});
