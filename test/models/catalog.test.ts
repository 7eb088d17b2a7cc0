import test from 'ava';
import { chatCompletions } from '../../lib/models/formats/chat-completions/endpoint.js';
import { listModels } from '../../lib/models/list-models.js';
import { messages } from '../../lib/models/formats/messages/endpoint.js';
import { modelsRouter } from '../../lib/models/models-router.js';
import { anthropicProvider } from '../../lib/models/providers/anthropic/index.js';
import { echoProvider } from '../../lib/models/providers/echo/index.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { createProvider } from '../../lib/models/providers/registry.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { CATALOG, PROVIDERS, modelsApp } from '../helpers/models-app.js';

const model = { id: 'm', provider: 'p' };
const provider = echoProvider({ id: 'p' });

// Each case: what is wrong, the catalog and providers, and the one line the factory throws.
const badCatalogs: Array<[string, unknown, unknown, string]> = [
  ['a catalog that is not an array', { m: model }, [provider], 'catalog must be an array'],
  ['a provider configuration where a Provider belongs', [model], [{ id: 'p', kind: 'echo' }], 'providers[0] must be a Provider: an object with an id and at least one of the methods chatCompletions, responses, messages, countTokens'],
  ['a model of a provider not given', [{ ...model, provider: 'q' }], [provider], "catalog[0].provider must name a configured provider ('q' is not one)"],
  ['two models of one id', [model, { ...model }], [provider], "catalog[1].id must be unique ('m' is taken)"],
  ['two providers of one id', [model], [provider, echoProvider({ id: 'p' })], "providers[1].id must be unique ('p' is taken)"],
  ['a typo in a model setting', [{ ...model, upstream_model: 'x' }], [provider], 'catalog[0].upstream_model is not a setting (expected id, provider, upstreamModel, deployments, fallbacks, created, owned_by, display_name, price)'],
  ['an empty upstreamModel', [{ ...model, upstreamModel: '' }], [provider], 'catalog[0].upstreamModel must be a non-empty string'],
  ['a model with neither provider nor deployments', [{ id: 'm' }], [provider], 'catalog[0].provider must be given (or deployments)'],
  ['a deployment of a provider not given', [{ id: 'm', deployments: [{ provider: 'p' }, { provider: 'q' }] }], [provider], "catalog[0].deployments[1].provider must name a configured provider ('q' is not one)"],
  ['a weight that is not a positive integer', [{ id: 'm', deployments: [{ provider: 'p', weight: 0 }] }], [provider], 'catalog[0].deployments[0].weight must be a positive integer'],
  ['no deployments', [{ id: 'm', deployments: [] }], [provider], 'catalog[0].deployments must list at least one deployment'],
  ['a fallback that is no model of the catalog', [{ ...model, fallbacks: ['nope'] }], [provider], "catalog[0].fallbacks[0] must name another model of the catalog ('nope' is not one)"],
  ['a model its own fallback', [{ ...model, fallbacks: ['m'] }], [provider], "catalog[0].fallbacks[0] must name another model of the catalog ('m' is not one)"],
  ['a created time that is not whole seconds', [{ ...model, created: '2024' }], [provider], 'catalog[0].created must be a non-negative integer'],
];

for (const [name, catalog, providers, message] of badCatalogs) {
  test(`the model handlers refuse ${name} when they are made`, (t) => {
    t.throws(() => modelsRouter({ catalog, providers } as never), { instanceOf: TypeError, message: `koa-model-gateway: modelsRouter(): ${message}` });
  });
}

test('upstreamModel defaults to the model id and created to 0', async (t) => {
  const gateway = await modelsApp({ catalog: [{ id: 'echo-plain', provider: 'local' }] });
  t.teardown(gateway.close);
  const key = await gateway.keyFor();
  const listed = await fetch(`${gateway.url}/v1/models`, { headers: { 'x-api-key': key } });
  t.deepEqual(await listed.json(), { object: 'list', data: [{ id: 'echo-plain', object: 'model', created: 0, owned_by: 'local' }] });
  const chat = await gateway.post('/v1/chat/completions', { model: 'echo-plain', messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': key });
  const answer = (await chat.json()) as { choices: Array<{ message: { content: string } }> };
  t.regex(answer.choices[0]?.message.content ?? '', /^Echo from echo-plain:/, 'the upstream was asked for the id itself');
});

test('the handlers check the rest of their options once, in the factory', (t) => {
  t.throws(() => listModels({ catalog: [model, model] }), { instanceOf: TypeError, message: "koa-model-gateway: listModels(): catalog[1].id must be unique ('m' is taken)" });
  t.throws(() => chatCompletions({ catalog: CATALOG, providers: PROVIDERS, timeoutMs: 0 }), {
    message: 'koa-model-gateway: chatCompletions(): timeoutMs must be a positive integer',
  });
  t.throws(() => messages({ catalog: CATALOG, providers: PROVIDERS, files: new MemoryFileStore() }), {
    message: 'koa-model-gateway: messages(): files and blobs go together: give both or neither',
  });
});

const badProviders: Array<[string, () => unknown, string]> = [
  ['a baseURL that is not http(s)', () => openAIProvider({ id: 'p', baseURL: 'ftp://x' }), 'openAIProvider(): baseURL must be an http:// or https:// URL'],
  ['credentials in the baseURL, without repeating them', () => anthropicProvider({ id: 'p', baseURL: 'https://user:secret@x' }), 'anthropicProvider(): baseURL must not hold credentials'],
  ['a typo in a setting', () => openAIProvider({ id: 'p', baseUrl: 'https://x' } as never), 'openAIProvider(): baseUrl is not a setting (expected id, baseURL, apiKey)'],
  ['an empty apiKey', () => anthropicProvider({ id: 'p', apiKey: '' }), 'anthropicProvider(): apiKey must be a non-empty string'],
  ['a baseURL on echo', () => echoProvider({ id: 'p', baseURL: 'https://x' } as never), 'echoProvider(): baseURL is not a setting (expected id)'],
  ['an unknown kind', () => createProvider({ id: 'p', kind: 'azure' } as never), 'createProvider(): kind must be one of openai, anthropic, echo'],
];

for (const [name, make, message] of badProviders) {
  test(`the provider factories refuse ${name}`, (t) => {
    t.throws(make, { instanceOf: TypeError, message: `koa-model-gateway: ${message}` });
  });
}
