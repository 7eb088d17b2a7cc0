import { Readable } from 'node:stream';
import test from 'ava';
import type { z } from 'zod';
import { chatCompletions } from '../../lib/models/formats/chat-completions/endpoint.js';
import { listModels } from '../../lib/models/list-models.js';
import { messages } from '../../lib/models/formats/messages/endpoint.js';
import { modelsRouter } from '../../lib/models/models-router.js';
import type { Provider, ProviderRequest } from '../../lib/models/provider.js';
import { anthropicProvider } from '../../lib/models/providers/anthropic/index.js';
import { echoProvider } from '../../lib/models/providers/echo/index.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { createProvider, providerRegistry, type ProviderRegistry } from '../../lib/models/providers/registry.js';
import { nonEmptyString, settingsObject } from '../../lib/settings/schemas.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { CATALOG, PROVIDERS, modelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';

/** The built-in kinds, as an unknown kind's error names them. */
const BUILT_IN_KINDS = Object.keys(providerRegistry).join(', ');

// The catalog and the providers: what the factories refuse, what GET /v1/models lists, the
// provider registry, and a Provider object of the user's own.

// GET /v1/models over the default catalog. The gateways start with the file and the tests wait for
// them: no top-level await, since the file shares a worker (test/groups/units.ts).
const catalogGateway = modelsApp();

// A team's own upstream, written in the test as a user would write it: no kind, no registry, no
// fork. It answers with Node streams on one endpoint, with a fetch Response on the other.
const received: ProviderRequest[] = [];
const inHouse: Provider = {
  id: 'in-house',
  async chatCompletions(request) {
    received.push(request);
    const answer = { id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: request.body.model, choices: [] };
    return { statusCode: 200, headers: { 'content-type': 'application/json' }, body: Readable.from([JSON.stringify(answer)]) };
  },
  async messages(request) {
    received.push(request);
    const events = ['event: message_start\ndata: {"type":"message_start"}\n\n', 'event: message_stop\ndata: {"type":"message_stop"}\n\n'];
    return new Response(events.join(''), { headers: { 'content-type': 'text/event-stream' } });
  },
};

const houseGateway = modelsApp({ catalog: [{ id: 'house-model', provider: 'in-house', upstreamModel: 'house-v2' }], providers: [inHouse] });
test.after.always(async () => Promise.all([(await catalogGateway).close(), (await houseGateway).close()]));

const model = { id: 'm', provider: 'p' };
const provider = echoProvider({ id: 'p' });

// Each case: what is wrong, the catalog and providers, and the one line the factory throws.
const badCatalogs: Array<[string, unknown, unknown, string]> = [
  ['a catalog that is not an array', { m: model }, [provider], 'catalog must be an array'],
  [
    'a provider configuration where a Provider belongs',
    [model],
    [{ id: 'p', kind: 'echo' }],
    'providers[0] must be a Provider: an object with an id and at least one of the methods chatCompletions, messages, responses, countTokens, embeddings, embed, or a neutral face ({ name, generate, stream })',
  ],
  ['a model of a provider not given', [{ ...model, provider: 'q' }], [provider], "catalog[0].provider must name a configured provider ('q' is not one)"],
  ['two models of one id', [model, { ...model }], [provider], "catalog[1].id must be unique ('m' is taken)"],
  ['two providers of one id', [model], [provider, echoProvider({ id: 'p' })], "providers[1].id must be unique ('p' is taken)"],
  [
    'a typo in a model setting',
    [{ ...model, upstream_model: 'x' }],
    [provider],
    'catalog[0].upstream_model is not a setting (expected id, provider, upstreamModel, deployments, fallbacks, created, owned_by, display_name, max_input_tokens, max_tokens, price, cache, type, maxOutputTokens)',
  ],
  ['an empty upstreamModel', [{ ...model, upstreamModel: '' }], [provider], 'catalog[0].upstreamModel must be a non-empty string'],
  ['a type that is neither chat nor embeddings', [{ ...model, type: 'vision' }], [provider], "catalog[0].type must be 'chat' or 'embeddings'"],
  ['a model with neither provider nor deployments', [{ id: 'm' }], [provider], 'catalog[0].provider must be given (or deployments)'],
  [
    'a deployment of a provider not given',
    [{ id: 'm', deployments: [{ provider: 'p' }, { provider: 'q' }] }],
    [provider],
    "catalog[0].deployments[1].provider must name a configured provider ('q' is not one)",
  ],
  [
    'a weight that is not a positive integer',
    [{ id: 'm', deployments: [{ provider: 'p', weight: 0 }] }],
    [provider],
    'catalog[0].deployments[0].weight must be a positive integer',
  ],
  ['no deployments', [{ id: 'm', deployments: [] }], [provider], 'catalog[0].deployments must list at least one deployment'],
  [
    'a fallback that is no model of the catalog',
    [{ ...model, fallbacks: ['nope'] }],
    [provider],
    "catalog[0].fallbacks[0] must name another model of the catalog ('nope' is not one)",
  ],
  [
    'a fallback of another type',
    [
      { ...model, fallbacks: ['e'] },
      { id: 'e', provider: 'p', type: 'embeddings' },
    ],
    [provider],
    "catalog[0].fallbacks[0] must name a model of the same type ('e' is of type embeddings)",
  ],
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
  t.throws(() => listModels({ catalog: [model, model] }), {
    instanceOf: TypeError,
    message: "koa-model-gateway: listModels(): catalog[1].id must be unique ('m' is taken)",
  });
  t.throws(() => chatCompletions({ catalog: CATALOG, providers: PROVIDERS, timeoutMs: 0 }), {
    message: 'koa-model-gateway: chatCompletions(): timeoutMs must be a positive integer of milliseconds, at most 2147483647 (about 24.8 days)',
  });
  t.throws(() => messages({ catalog: CATALOG, providers: PROVIDERS, files: new MemoryFileStore() }), {
    message: 'koa-model-gateway: messages(): files and blobs go together: give both or neither',
  });
});

const badProviders: Array<[string, () => unknown, string]> = [
  ['a baseURL that is not http(s)', () => openAIProvider({ id: 'p', baseURL: 'ftp://x' }), 'openAIProvider(): baseURL must be an http:// or https:// URL'],
  [
    'credentials in the baseURL, without repeating them',
    () => anthropicProvider({ id: 'p', baseURL: 'https://user:secret@x' }),
    'anthropicProvider(): baseURL must not hold credentials',
  ],
  [
    'a typo in a setting',
    () => openAIProvider({ id: 'p', baseUrl: 'https://x' } as never),
    'openAIProvider(): baseUrl is not a setting (expected id, baseURL, apiKey)',
  ],
  ['an empty apiKey', () => anthropicProvider({ id: 'p', apiKey: '' }), 'anthropicProvider(): apiKey must be a non-empty string'],
  ['a baseURL on echo', () => echoProvider({ id: 'p', baseURL: 'https://x' } as never), 'echoProvider(): baseURL is not a setting (expected id)'],
  ['an unknown kind', () => createProvider({ id: 'p', kind: 'azure' } as never), `createProvider(): kind must be one of ${BUILT_IN_KINDS}`],
];

for (const [name, make, message] of badProviders) {
  test(`the provider factories refuse ${name}`, (t) => {
    t.throws(make, { instanceOf: TypeError, message: `koa-model-gateway: ${message}` });
  });
}

// GET /v1/models, as the key's allowlist lets it see the catalog.
const list = async (key: string) => {
  const response = await fetch(`${(await catalogGateway).url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
  return { status: response.status, requestId: response.headers.get('x-request-id'), body: (await response.json()) as unknown };
};

test('a key without allowlist sees the whole catalog, in catalog order', async (t) => {
  const { status, requestId, body } = await list(await (await catalogGateway).keyFor(['models:read']));
  t.is(status, 200);
  t.regex(requestId ?? '', /^req_[A-Za-z0-9]{32}$/);
  t.deepEqual(body, {
    object: 'list',
    data: [
      { id: 'echo-1', object: 'model', created: 1_744_000_000, owned_by: 'local' },
      { id: 'gpt-test', object: 'model', created: 1_744_000_100, owned_by: 'openai' },
      { id: 'claude-test', object: 'model', created: 1_744_000_200, owned_by: 'anthropic' },
    ],
  });
});

test('a key with an allowlist sees only the listed models that exist', async (t) => {
  const { body } = await list(await (await catalogGateway).keyFor(['models:read'], { models: ['claude-test', 'echo-1', 'not-in-catalog'] }));
  t.deepEqual(body, {
    object: 'list',
    data: [
      { id: 'echo-1', object: 'model', created: 1_744_000_000, owned_by: 'local' },
      { id: 'claude-test', object: 'model', created: 1_744_000_200, owned_by: 'anthropic' },
    ],
  });
});

test('an empty allowlist sees no model', async (t) => {
  t.deepEqual((await list(await (await catalogGateway).keyFor(['models:read'], { models: [] }))).body, { object: 'list', data: [] });
});

test('listing needs models:read', async (t) => {
  const { status, body } = await list(await (await catalogGateway).keyFor(['chat:completions']));
  t.is(status, 403);
  t.deepEqual(body, { error: { message: 'Forbidden', type: 'permission_error', param: null, code: 'forbidden' } });
});

// A kind of a team's own, beside the built-in ones: a registry is a plain object, extended by spreading it.
const inHouseOptions = settingsObject({ id: nonEmptyString, region: nonEmptyString });
const kinds = {
  ...providerRegistry,
  'in-house': { options: inHouseOptions, create: ({ id }: z.input<typeof inHouseOptions>): Provider => ({ id }) },
} satisfies ProviderRegistry;

test('createProvider() makes a kind of an extended registry, and still the built-in kinds', (t) => {
  t.is(createProvider({ kind: 'in-house', id: 'house', region: 'eu' }, kinds).id, 'house');
  t.truthy(createProvider({ kind: 'echo', id: 'local' }, kinds).chatCompletions);
});

test("createProvider() refuses a kind its registry does not have, naming the registry's kinds", (t) => {
  t.throws(() => createProvider({ kind: 'in-house', id: 'house', region: 'eu' } as never), {
    instanceOf: TypeError,
    message: `koa-model-gateway: createProvider(): kind must be one of ${BUILT_IN_KINDS}`,
  });
  t.throws(() => createProvider({ kind: 'azure', id: 'a' } as never, kinds), {
    instanceOf: TypeError,
    message: `koa-model-gateway: createProvider(): kind must be one of ${BUILT_IN_KINDS}, in-house`,
  });
});

// The user's own Provider, inHouse above.
test.serial('a Provider object of the user is served on both endpoints like a built-in one, files attached', async (t) => {
  const house = await houseGateway;
  const key = await house.keyFor();
  const fileId = await house.storePdf(makePdf(1), { filename: 'memo.pdf' });
  const chat = await house.post(
    '/v1/chat/completions',
    { model: 'house-model', messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: fileId } }] }] },
    { 'x-api-key': key },
  );
  t.is(chat.status, 200);
  t.like(await chat.json(), { id: 'chatcmpl-1', model: 'house-model' });
  const [sent] = received.splice(0);
  t.is(sent?.body.model, 'house-v2', 'the model is renamed to its upstreamModel');
  t.regex(JSON.stringify(sent?.body), /"filename":"memo\.pdf","file_data":"data:application\/pdf;base64,/, 'the stored PDF is inlined');

  const streamed = await house.post(
    '/v1/messages',
    { model: 'house-model', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'hi' }] },
    { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
  );
  t.is(streamed.headers.get('content-type'), 'text/event-stream; charset=utf-8');
  t.is(await streamed.text(), 'event: message_start\ndata: {"type":"message_start"}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n');
  t.deepEqual(
    received.splice(0).map((request) => request.headers),
    [{ 'anthropic-version': '2023-06-01' }],
  );
});

test('a Provider that spreads the request it is handed still gets a signal that aborts the call when the upstream is silent', async (t) => {
  // A wrapper as a user writes one: it passes the request on with one field changed.
  const aborted: boolean[] = [];
  const silent: Provider = {
    id: 'silent',
    chatCompletions(request) {
      const passedOn: ProviderRequest = { ...request, headers: { ...request.headers, 'x-team': 'a' } };
      return new Promise((_resolve, reject) => {
        passedOn.signal.addEventListener('abort', () => {
          aborted.push(passedOn.signal.aborted);
          reject(new Error('aborted'));
        });
      });
    },
  };
  const impatient = await modelsApp({ catalog: [{ id: 'silent-model', provider: 'silent', upstreamModel: 'v1' }], providers: [silent], timeoutMs: 50 });
  t.teardown(() => impatient.close());
  const answer = await impatient.post(
    '/v1/chat/completions',
    { model: 'silent-model', messages: [{ role: 'user', content: 'hi' }] },
    { 'x-api-key': await impatient.keyFor() },
  );
  t.is(answer.status, 504);
  t.deepEqual(aborted, [true]);
});
