import test from 'ava';
import { adminAuth } from '../../lib/admin/admin-auth.js';
import { adminRouter } from '../../lib/admin/admin-router.js';
import { adminSessions } from '../../lib/admin/admin-sessions.js';
import { MemoryAdminSessionStore } from '../../lib/stores/memory/admin-session-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';

test('the admin factories refuse a configuration they cannot serve, when they are made', (t) => {
  const keys = new MemoryKeyStore();
  const files = new MemoryFileStore();
  t.throws(() => adminAuth({} as never), { instanceOf: TypeError, message: /AdminTokenStore/ });
  t.throws(() => adminRouter({ files, catalog: [] } as never), { instanceOf: TypeError, message: /KeyStore/ });
  t.throws(() => adminRouter({ keys, catalog: [] } as never), { instanceOf: TypeError, message: /FileStore/ });
  t.throws(() => adminRouter({ keys, files } as never), { instanceOf: TypeError, message: /catalog/ });
  t.throws(() => adminRouter({ keys, files, catalog: [], keyPrefix: 'kmg_' }), { instanceOf: TypeError, message: /prefix/ });
  t.throws(() => adminRouter({ keys, files, catalog: [], usageStore: {} as never }), { instanceOf: TypeError, message: /UsageStore/ });
  t.throws(() => adminSessions({} as never), { instanceOf: TypeError, message: /AdminSessionStore/ });
  t.throws(() => adminSessions({ sessions: new MemoryAdminSessionStore(), ttlSeconds: 0 }), { instanceOf: TypeError, message: /ttlSeconds/ });
});

test('adminRouter() serves GET /usage only when it is given a usage store', (t) => {
  const routes = (router: ReturnType<typeof adminRouter>) => router.stack.map((layer) => String(layer.path));
  const options = { keys: new MemoryKeyStore(), files: new MemoryFileStore(), catalog: [] };
  t.false(routes(adminRouter(options)).includes('/admin/v1/usage'));
  t.true(routes(adminRouter({ ...options, usageStore: new MemoryUsageStore() })).includes('/admin/v1/usage'));
});
