import { Readable } from 'node:stream';
import Koa from 'koa';
import { apiKey } from '../../lib/auth/api-key.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { SCOPES, type Scope } from '../../lib/auth/scopes.js';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import { newFileId } from '../../lib/files/file-id.js';
import type { CatalogModel } from '../../lib/models/catalog.js';
import { modelsRouter, type ModelsRouterOptions } from '../../lib/models/models-router.js';
import type { Provider } from '../../lib/models/provider.js';
import type { ModelLimits } from '../../lib/quota/model-limits.js';
import { anthropicProvider } from '../../lib/models/providers/anthropic/index.js';
import { echoProvider } from '../../lib/models/providers/echo/index.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { underPath } from '../../lib/under-path.js';
import { listen } from './http.js';

export const OPENAI_PROVIDER_KEY = 'sk-provider-openai-secret';
export const ANTHROPIC_PROVIDER_KEY = 'sk-ant-provider-secret';

/**
 * The providers of CATALOG: echo (`local`), and OpenAI's and Anthropic's APIs at `upstream` (a
 * `scriptedUpstream()`'s url), each with its provider key. Without `upstream`, nothing answers
 * there: for tests whose calls never reach an upstream.
 */
export function catalogProviders(upstream = 'http://upstream.invalid'): Provider[] {
  return [
    echoProvider({ id: 'local' }),
    openAIProvider({ id: 'openai', baseURL: `${upstream}/v1`, apiKey: OPENAI_PROVIDER_KEY }),
    anthropicProvider({ id: 'anthropic', baseURL: upstream, apiKey: ANTHROPIC_PROVIDER_KEY }),
  ];
}

export const PROVIDERS: Provider[] = catalogProviders();

export const CATALOG: CatalogModel[] = [
  { id: 'echo-1', provider: 'local', upstreamModel: 'echo-upstream-1', created: 1_744_000_000 },
  { id: 'gpt-test', provider: 'openai', upstreamModel: 'gpt-4o-mini-2024-07-18', created: 1_744_000_100, owned_by: 'openai' },
  { id: 'claude-test', provider: 'anthropic', upstreamModel: 'claude-sonnet-4-5-20250929', created: 1_744_000_200 },
];

/** What `modelsApp()` resolves to. */
export type ModelsApp = Awaited<ReturnType<typeof modelsApp>>;

/**
 * The models API composed as a gateway would (`gatewayErrors()`, `apiKey()` under /v1,
 * `modelsRouter()`), over memory stores, on a random loopback port, with one attempt per call
 * unless `options.routing` says otherwise. Errors reported on
 * `app.on('error')` are collected in `reported`.
 */
export async function modelsApp(options: Partial<ModelsRouterOptions> = {}) {
  const keys = new MemoryKeyStore();
  const files = new MemoryFileStore();
  const blobs = new MemoryBlobStore();
  // One attempt unless a test routes: each scripted answer answers one call.
  const endpointOptions: ModelsRouterOptions = { catalog: CATALOG, providers: PROVIDERS, files, blobs, routing: { maxAttempts: 1 }, ...options };
  const router = modelsRouter(endpointOptions);
  const app = new Koa();
  const reported: unknown[] = [];
  app.on('error', (err: unknown) => reported.push(err));
  app.use(gatewayErrors());
  app.use(underPath('/v1', apiKey({ store: keys })));
  app.use(router.routes());
  app.use(router.allowedMethods());
  const server = await listen(app);

  const keyFor = async (scopes: Scope[] = [...SCOPES], extra: { models?: string[] | null; account?: string; limits?: ModelLimits } = {}) =>
    (await createApiKey(keys, { prefix: 'kmg', account: extra.account ?? 'acme', scopes, models: extra.models ?? null, limits: extra.limits ?? {} })).key;

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

  /** POSTs `body` as JSON to `path` with `headers`; `signal` aborts it. */
  const post = (path: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
      ...(signal && { signal }),
    });

  return { url: server.url, close: server.close, keyFor, storePdf, post, files, blobs, reported };
}
