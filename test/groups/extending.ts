import { loadTogether } from '../helpers/together.js';

// The package's surface, the examples, the provider contract (bounded for a busy machine), the
// files API, the audit log and hostile input, on in-process servers.
await loadTogether(import.meta.url, [
  '../../examples/cohere-provider/cohere-provider.test.js',
  '../../examples/json-file-token-store/json-file-token-store.test.js',
  '../admin/audit.test.js',
  '../files/files-api.test.js',
  '../fuzz/hostile-requests.test.js',
  '../package/surface.test.js',
  '../server/storage.test.js',
  '../testing/provider-contract.test.js',
]);
