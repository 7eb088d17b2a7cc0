import test from 'ava';
import { validateCatalog } from '../../lib/models/catalog.js';
import { chatCompletions } from '../../lib/models/chat-completions.js';
import { listModels } from '../../lib/models/list-models.js';
import { messages } from '../../lib/models/messages.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { CATALOG, PROVIDERS } from '../helpers/models-app.js';

const model = { id: 'm', provider: 'p', upstreamModel: 'up', created: 1 };
const provider = { id: 'p', kind: 'echo' };

const cases: Array<[string, unknown, unknown, string]> = [
  ['models not an array', { m: model }, [provider], 'koa-model-gateway: the model catalog must be an array'],
  ['providers not an array', [model], provider, 'koa-model-gateway: the providers must be an array'],
  ['unknown provider kind', [model], [{ id: 'p', kind: 'azure' }], 'koa-model-gateway: providers[0]: unknown kind "azure" (expected openai, anthropic, echo)'],
  ['model of an unknown provider', [{ ...model, provider: 'q' }], [provider], "koa-model-gateway: models[0] ('m'): unknown provider 'q'"],
  ['duplicate model ids', [model, { ...model }], [provider], "koa-model-gateway: duplicate model id 'm'"],
  ['duplicate provider ids', [model], [provider, { id: 'p', kind: 'openai' }], "koa-model-gateway: duplicate provider id 'p'"],
  ['missing upstreamModel', [{ id: 'm', provider: 'p', created: 1 }], [provider], "koa-model-gateway: models[0]: 'upstreamModel' must be a non-empty string"],
  ['created not an integer', [{ ...model, created: '2024' }], [provider], "koa-model-gateway: models[0]: 'created' must be a non-negative integer (Unix seconds)"],
  ['a typo in a setting', [model], [{ id: 'p', kind: 'openai', baseUrl: 'https://x' }], "koa-model-gateway: providers[0]: unknown setting 'baseUrl' (expected id, kind, baseURL, apiKey)"],
  ['baseURL not http(s)', [model], [{ id: 'p', kind: 'openai', baseURL: 'ftp://x' }], "koa-model-gateway: providers[0]: 'baseURL' must be an http:// or https:// URL"],
  ['credentials in baseURL', [model], [{ id: 'p', kind: 'openai', baseURL: 'https://user:secret@x' }], "koa-model-gateway: providers[0]: 'baseURL' must not hold credentials: put them in 'apiKey'"],
  ['baseURL on echo', [model], [{ id: 'p', kind: 'echo', baseURL: 'https://x' }], 'koa-model-gateway: providers[0]: an echo provider has no baseURL'],
  ['empty apiKey', [model], [{ id: 'p', kind: 'anthropic', apiKey: '' }], "koa-model-gateway: providers[0]: 'apiKey' must be a non-empty string"],
];

for (const [name, models, providers, message] of cases) {
  test(`validateCatalog refuses ${name}`, (t) => {
    t.throws(() => validateCatalog(models, providers), { instanceOf: TypeError, message });
  });
}

test('validateCatalog returns a good configuration as it is', (t) => {
  t.deepEqual(validateCatalog(CATALOG, PROVIDERS), { models: CATALOG, providers: PROVIDERS });
});

test('the handlers check their configuration once, in the factory', (t) => {
  const bad = { catalog: [{ ...model, provider: 'q' }], providers: [provider] } as never;
  t.throws(() => chatCompletions(bad), { instanceOf: TypeError });
  t.throws(() => messages(bad), { instanceOf: TypeError });
  t.throws(() => listModels({ catalog: [model, model] }), { instanceOf: TypeError, message: "koa-model-gateway: duplicate model id 'm'" });
  t.throws(() => chatCompletions({ catalog: CATALOG, providers: PROVIDERS, timeoutMs: 0 }), {
    message: "koa-model-gateway: 'timeoutMs' must be a positive integer",
  });
  t.throws(() => messages({ catalog: CATALOG, providers: PROVIDERS, files: new MemoryFileStore() }), {
    message: "koa-model-gateway: 'files' and 'blobs' go together: give both or neither",
  });
});
