import { Readable } from 'node:stream';
import Router from '@koa/router';
import Koa from 'koa';
import { apiKey } from '../../lib/auth/api-key.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { requireScope } from '../../lib/auth/require-scope.js';
import { SCOPES, type Scope } from '../../lib/auth/scopes.js';
import { anthropicErrors } from '../../lib/errors/anthropic-errors.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { newFileId } from '../../lib/files/file-id.js';
import type { CatalogModel, ProviderConfig } from '../../lib/models/catalog.js';
import { chatCompletions } from '../../lib/models/chat-completions.js';
import { listModels } from '../../lib/models/list-models.js';
import { messages } from '../../lib/models/messages.js';
import type { ModelEndpointOptions } from '../../lib/models/model-endpoint.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { listen } from './http.js';

export const OPENAI_UPSTREAM = 'https://openai.upstream.test';
export const ANTHROPIC_UPSTREAM = 'https://anthropic.upstream.test';
export const OPENAI_PROVIDER_KEY = 'sk-provider-openai-secret';
export const ANTHROPIC_PROVIDER_KEY = 'sk-ant-provider-secret';

export const PROVIDERS: ProviderConfig[] = [
  { id: 'local', kind: 'echo' },
  { id: 'openai', kind: 'openai', baseURL: `${OPENAI_UPSTREAM}/v1`, apiKey: OPENAI_PROVIDER_KEY },
  { id: 'anthropic', kind: 'anthropic', baseURL: ANTHROPIC_UPSTREAM, apiKey: ANTHROPIC_PROVIDER_KEY },
];

export const CATALOG: CatalogModel[] = [
  { id: 'echo-1', provider: 'local', upstreamModel: 'echo-upstream-1', created: 1_744_000_000 },
  { id: 'gpt-test', provider: 'openai', upstreamModel: 'gpt-4o-mini-2024-07-18', created: 1_744_000_100, owned_by: 'openai' },
  { id: 'claude-test', provider: 'anthropic', upstreamModel: 'claude-sonnet-4-5-20250929', created: 1_744_000_200 },
];

/**
 * The models API composed as a gateway would: Shape A on /v1/models and /v1/chat/completions,
 * Shape B on /v1/messages, each behind apiKey() and its scope, over memory stores, on a random
 * loopback port. Errors reported on `app.on('error')` are collected in `reported`.
 */
export async function modelsApp(options: Partial<ModelEndpointOptions> = {}) {
  const keys = new MemoryKeyStore();
  const files = new MemoryFileStore();
  const blobs = new MemoryBlobStore();
  const endpointOptions: ModelEndpointOptions = { catalog: CATALOG, providers: PROVIDERS, files, blobs, ...options };
  const auth = apiKey({ store: keys });
  const router = new Router();
  router.get('/v1/models', openAIErrors(), auth, requireScope('models:read'), listModels({ catalog: endpointOptions.catalog }));
  router.post('/v1/chat/completions', openAIErrors(), auth, requireScope('chat:completions'), chatCompletions(endpointOptions));
  router.post('/v1/messages', anthropicErrors(), auth, requireScope('messages:create'), messages(endpointOptions));
  const app = new Koa();
  const reported: unknown[] = [];
  app.on('error', (err: unknown) => reported.push(err));
  app.use(router.routes());
  const server = await listen(app);

  const keyFor = async (scopes: Scope[] = [...SCOPES], extra: { models?: string[] | null; account?: string } = {}) =>
    (await createApiKey(keys, { prefix: 'kmg', account: extra.account ?? 'acme', scopes, models: extra.models ?? null })).key;

  /** Stores a PDF as the files API would and returns its id. */
  const storePdf = async (bytes: Buffer, extra: { filename?: string; account?: string; expiresAt?: number | null } = {}) => {
    const createdAt = Math.floor(Date.now() / 1000);
    const id = newFileId(createdAt);
    await blobs.put(id, Readable.from([bytes]));
    const record = {
      id,
      account: extra.account ?? 'acme',
      filename: extra.filename ?? 'report.pdf',
      bytes: bytes.length,
      createdAt,
      expiresAt: extra.expiresAt ?? null,
    };
    await files.create(record, { maxFiles: 1000, maxBytes: 100_000_000 }, createdAt);
    return id;
  };

  /** POSTs `body` as JSON to `path` with `headers`. */
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

  return { url: server.url, close: server.close, keyFor, storePdf, post, files, blobs, reported };
}
