import { loadTogether } from '../helpers/together.js';

// The model endpoints' checks and translation against in-process upstreams: the check order,
// access, Responses and count_tokens, embeddings, field classes, conformance and Vertex AI. Their
// servers start in `test.before`, and only fake clocks bound them.
await loadTogether(import.meta.url, [
  '../models/access.test.js',
  '../models/embeddings.test.js',
  '../models/responses-count-tokens-sdk.test.js',
  '../providers/vertex.test.js',
  '../spec/check-order.test.js',
  '../translation/conformance.test.js',
  '../translation/field-classes.test.js',
]);
