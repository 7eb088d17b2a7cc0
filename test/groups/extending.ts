import { loadTogether } from '../helpers/together.js';

// The package's surface, the examples, the provider contract (bounded for a busy machine) and the
// files API on in-process servers.
await loadTogether(import.meta.url, [
  '../../examples/cohere-provider/cohere-provider.test.js',
  '../../examples/json-file-token-store/json-file-token-store.test.js',
  '../files/files-api.test.js',
  '../package/surface.test.js',
  '../server/storage.test.js',
  '../testing/provider-contract.test.js',
]);
