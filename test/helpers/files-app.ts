import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Koa from 'koa';
import { apiKey } from '../../lib/auth/api-key.js';
import { createApiKey } from '../../lib/auth/keys.js';
import type { Scope } from '../../lib/auth/scopes.js';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import type { BlobStore } from '../../lib/files/blob-store.js';
import type { FileStore } from '../../lib/files/file-store.js';
import type { FileLimits } from '../../lib/files/file-limits.js';
import { filesRouter } from '../../lib/files/files-router.js';
import type { CreationLimiter } from '../../lib/quota/creation-limiter.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { listen } from './http.js';
import { multipart, uploadParts } from './multipart.js';
import { until } from './poll.js';

const FILE_SCOPES: Scope[] = ['files:write', 'files:read', 'files:delete'];

export interface FilesAppOptions {
  files?: FileStore;
  blobs?: BlobStore;
  limits?: Partial<FileLimits>;
  creationLimiter?: CreationLimiter;
}

export interface FilesApp {
  url: string;
  files: FileStore;
  blobs: BlobStore;
  /** The upload temp dir of this app alone. */
  tempDir: string;
  /** Keys: `a` and `a2` (account A, every files scope), `b` (account B), `readOnly`, `writeOnly`, `noFiles` (account A). */
  keys: Record<'a' | 'a2' | 'b' | 'readOnly' | 'writeOnly' | 'noFiles', string>;
  /** The app's clock, in Unix seconds: starts at the real time and moves only when told. */
  clock: { seconds: number };
  /** What is left in the temp dir. */
  tempFiles(): Promise<string[]>;
  /** Resolves once the server has finished every request it started (an aborted one included). */
  idle(): Promise<void>;
  /** What the app reported on `app.on('error')`: unexpected errors only. */
  serverErrors: unknown[];
  close(): Promise<void>;
}

/**
 * A composed app over real HTTP: gatewayErrors + apiKey(MemoryKeyStore) + filesRouter, on the
 * stores given (memory by default), with a controllable clock and a temp dir of its own.
 */
export async function filesApp(options: FilesAppOptions = {}): Promise<FilesApp> {
  const files = options.files ?? new MemoryFileStore();
  const blobs = options.blobs ?? new MemoryBlobStore();
  const tempDir = await mkdtemp(join(tmpdir(), 'kmg-upload-test-'));
  const clock = { seconds: Math.floor(Date.now() / 1000) };
  const keyStore = new MemoryKeyStore();
  const key = async (account: string, scopes: Scope[]) => (await createApiKey(keyStore, { prefix: 'kmg', account, scopes })).key;
  const keys = {
    a: await key('acct-a', FILE_SCOPES),
    a2: await key('acct-a', FILE_SCOPES),
    b: await key('acct-b', FILE_SCOPES),
    readOnly: await key('acct-a', ['files:read']),
    writeOnly: await key('acct-a', ['files:write']),
    noFiles: await key('acct-a', ['models:read', 'chat:completions']),
  };
  const router = filesRouter({
    files,
    blobs,
    tempDir,
    nowMs: () => clock.seconds * 1000,
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.creationLimiter ? { creationLimiter: options.creationLimiter } : {}),
  });
  let inFlight = 0;
  const waiting: (() => void)[] = [];
  const serverErrors: unknown[] = [];
  const app = new Koa();
  app.on('error', (err: unknown) => serverErrors.push(err));
  app.use(async function countRequests(_ctx, next) {
    inFlight += 1;
    try {
      await next();
    } finally {
      inFlight -= 1;
      if (inFlight === 0) for (const resolve of waiting.splice(0)) resolve();
    }
  });
  app
    .use(gatewayErrors())
    .use(apiKey({ store: keyStore }))
    .use(router.routes())
    .use(router.allowedMethods());
  const server = await listen(app);
  return {
    url: server.url,
    files,
    blobs,
    tempDir,
    keys,
    clock,
    tempFiles: () => readdir(tempDir),
    serverErrors,
    idle: () => (inFlight === 0 ? Promise.resolve() : new Promise((resolve) => waiting.push(resolve))),
    async close() {
      await server.close();
      await rm(tempDir, { recursive: true, force: true });
    },
  };
}

/** Koa reports a client that hangs up mid-body (an HTTP parse error on its socket): no server failure. */
export function droppedConnection(err: unknown): boolean {
  return /^(HPE_|ECONNRESET)/.test(String((err as { code?: unknown }).code));
}

/**
 * Sends half of an upload of `pdf` as account a, waits until the server is streaming it to disk,
 * then drops the connection, and resolves once the server has finished with the request.
 */
export async function abortUploadMidway(app: FilesApp, pdf: Buffer): Promise<void> {
  const { body, contentType } = multipart(uploadParts(pdf));
  const req = httpRequest(`${app.url}/v1/files`, {
    method: 'POST',
    agent: false,
    headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': contentType, 'content-length': String(body.length) },
  });
  req.on('error', () => undefined);
  req.write(body.subarray(0, body.length / 2));
  await until(
    () => app.tempFiles(),
    (files) => files.length > 0,
    { intervalMs: 5, attempts: 2000 },
  );
  req.destroy();
  await app.idle();
}
