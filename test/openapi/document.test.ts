import SwaggerParser from '@apidevtools/swagger-parser';
import test from 'ava';
import { adminRouter } from '../../lib/admin/admin-router.js';
import { adminSessions } from '../../lib/admin/admin-sessions.js';
import { auditRouter } from '../../lib/admin/audit-router.js';
import { budgetsRouter } from '../../lib/admin/budgets-router.js';
import { MemoryAccountBudgetStore } from '../../lib/cost/account-budget-store.js';
import { filesRouter } from '../../lib/files/files-router.js';
import { modelsRouter } from '../../lib/models/models-router.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { MemoryAdminSessionStore } from '../../lib/stores/memory/admin-session-store.js';
import { MemoryAuditStore } from '../../lib/stores/memory/audit-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { healthRouter } from '../../reference-server/health.js';
import { openApiRouter } from '../../reference-server/openapi.js';
import { CATALOG, PROVIDERS } from '../helpers/models-app.js';
import { OPENAPI_DOCUMENT } from '../helpers/openapi.js';

const paths = OPENAPI_DOCUMENT.paths as Record<string, Record<string, unknown>>;
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/** Every operation of the document, as `METHOD /path/{param}`. */
const documented = Object.entries(paths)
  .flatMap(([path, item]) => Object.keys(item).filter((key) => METHODS.includes(key)).map((method) => `${method.toUpperCase()} ${path}`))
  .sort();

test('docs/openapi.json is a valid OpenAPI 3.1 document', async (t) => {
  // The validator dereferences in place: it gets a copy.
  const api = await SwaggerParser.validate(structuredClone(OPENAPI_DOCUMENT) as never);
  t.is((api as { openapi: string }).openapi, '3.1.0');
});

test('every route of the reference server is in the document, and nothing else', (t) => {
  const stores = { files: new MemoryFileStore(), blobs: new MemoryBlobStore() };
  const routers = [
    filesRouter(stores),
    modelsRouter({ catalog: CATALOG, providers: PROVIDERS, ...stores }),
    adminRouter({ keys: new MemoryKeyStore(), files: stores.files, usageStore: new MemoryUsageStore(), catalog: CATALOG }),
    adminSessions({ sessions: new MemoryAdminSessionStore() }),
    budgetsRouter({ accounts: new MemoryAccountBudgetStore(), usageStore: new MemoryUsageStore(), catalog: [] }),
    auditRouter({ store: new MemoryAuditStore() }),
    healthRouter({ checks: {} }),
    openApiRouter(),
  ];
  const served = routers
    .flatMap((router) => router.stack)
    .flatMap((layer) => {
      const path = String(layer.path).replace(/[:*](\w+)/g, '{$1}');
      return layer.methods.filter((method) => method !== 'HEAD').map((method) => `${method} ${path}`);
    })
    .sort();
  t.deepEqual(served, documented);
});
