/**
 * A files-only service: the five files endpoints, metadata and keys in a database through Knex
 * (SQLite here; PostgreSQL with `client: 'pg'`), bytes in a directory. No models, no rate limits.
 *
 *   node --conditions=@koa-model-gateway/source --import tsx examples/files-on-knex.ts
 *
 * FILES_DB (default ./files-example.sqlite) and FILES_DIR (default ./files-example) say where.
 */
import Koa from 'koa';
import knexFactory from 'knex';
import { apiKey, gatewayErrors } from 'koa-model-gateway';
import { createApiKey } from 'koa-model-gateway/auth';
import { filesRouter, sweep } from 'koa-model-gateway/files';
import { FsBlobStore } from 'koa-model-gateway/stores/fs';
import { KnexFileStore, KnexKeyStore, migrate } from 'koa-model-gateway/stores/knex';

const knex = knexFactory({
  client: 'better-sqlite3',
  connection: { filename: process.env.FILES_DB ?? './files-example.sqlite' },
  useNullAsDefault: true,
});
await migrate(knex);
const keys = new KnexKeyStore(knex);
const files = new KnexFileStore(knex);
const blobs = new FsBlobStore({ directory: process.env.FILES_DIR ?? './files-example' });

const endpoints = filesRouter({ files, blobs });
const app = new Koa();
app.use(gatewayErrors());
app.use(apiKey({ store: keys }));
app.use(endpoints.routes());
app.use(endpoints.allowedMethods());

// Expired files and orphaned bytes are removed every ten minutes.
setInterval(() => void sweep({ files, blobs }).catch((err: unknown) => console.error('sweep failed', err)), 600_000).unref();

const { key } = await createApiKey(keys, {
  prefix: 'kmg',
  account: 'demo',
  scopes: ['files:write', 'files:read', 'files:delete'],
});
const server = app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 3000;
  console.log(`Listening on http://127.0.0.1:${port}`);
  console.log(`API key: ${key}`);
});
