import test from 'ava';
import { CATALOG, modelsApp } from '../helpers/models-app.js';

// A catalog whose ids hold what real ids hold: dots and slashes.
const catalog = [
  ...CATALOG,
  { id: 'acme/llama-3.1-8b', provider: 'local', display_name: 'Llama 3.1 8B', created: 1_744_000_300 },
  { id: 'm4', provider: 'local' },
  { id: 'm5', provider: 'local' },
];
const gateway = await modelsApp({ catalog });
test.after.always(() => gateway.close());

const ANTHROPIC = { 'anthropic-version': '2023-06-01' };
const REQUEST_ID = /^req_[A-Za-z0-9]{32}$/;

async function get(path: string, key: string, headers: Record<string, string> = {}) {
  const response = await fetch(`${gateway.url}${path}`, { headers: { 'x-api-key': key, ...headers } });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

const ids = (page: Record<string, unknown>) => (page.data as Array<{ id: string }>).map((model) => model.id);

test('GET /v1/models/{model}: the model in OpenAI shape, ids with dots and slashes sent as they are or encoded', async (t) => {
  const key = await gateway.keyFor(['models:read']);
  t.deepEqual((await get('/v1/models/gpt-test', key)).body, { id: 'gpt-test', object: 'model', created: 1_744_000_100, owned_by: 'openai' });
  const expected = { id: 'acme/llama-3.1-8b', object: 'model', created: 1_744_000_300, owned_by: 'local' };
  t.deepEqual((await get('/v1/models/acme/llama-3.1-8b', key)).body, expected);
  t.deepEqual((await get(`/v1/models/${encodeURIComponent('acme/llama-3.1-8b')}`, key)).body, expected);
});

test('GET /v1/models/{model}: with anthropic-version, Anthropic shape, display_name defaulting to the id', async (t) => {
  const key = await gateway.keyFor(['models:read']);
  t.deepEqual((await get('/v1/models/acme/llama-3.1-8b', key, ANTHROPIC)).body, {
    type: 'model',
    id: 'acme/llama-3.1-8b',
    display_name: 'Llama 3.1 8B',
    created_at: '2025-04-07T04:31:40Z',
  });
  t.deepEqual((await get('/v1/models/m4', key, ANTHROPIC)).body, { type: 'model', id: 'm4', display_name: 'm4', created_at: '1970-01-01T00:00:00Z' });
});

test('GET /v1/models/{model}: a model outside the allowlist is the same 404 as one that does not exist, in either shape', async (t) => {
  const restricted = await gateway.keyFor(['models:read'], { models: ['echo-1'] });
  const unrestricted = await gateway.keyFor(['models:read']);
  const notFoundA = (id: string) => ({ error: { message: `The model '${id}' does not exist`, type: 'invalid_request_error', param: null, code: 'model_not_found' } });
  const outsideA = await get('/v1/models/gpt-test', restricted);
  const unknownA = await get('/v1/models/no-such-model', unrestricted);
  t.deepEqual([outsideA.status, outsideA.body], [404, notFoundA('gpt-test')]);
  t.deepEqual([unknownA.status, unknownA.body], [404, notFoundA('no-such-model')]);

  const outsideB = await get('/v1/models/gpt-test', restricted, ANTHROPIC);
  const unknownB = await get('/v1/models/no-such-model', unrestricted, ANTHROPIC);
  const notFoundB = { type: 'error', error: { type: 'not_found_error', message: 'Model not found' } };
  for (const response of [outsideB, unknownB]) {
    t.is(response.status, 404);
    t.deepEqual(response.body, { ...notFoundB, request_id: response.headers.get('request-id') });
    t.regex(response.headers.get('request-id') ?? '', REQUEST_ID);
  }
});

test('GET /v1/models/{model} needs models:read', async (t) => {
  const { status, body } = await get('/v1/models/echo-1', await gateway.keyFor(['chat:completions']), ANTHROPIC);
  t.is(status, 403);
  t.like(body, { type: 'error', error: { type: 'permission_error', message: 'Forbidden' } });
});

test('GET /v1/models with anthropic-version: Anthropic shape, filtered by the allowlist', async (t) => {
  const key = await gateway.keyFor(['models:read'], { models: ['claude-test', 'echo-1'] });
  const { status, headers, body } = await get('/v1/models', key, ANTHROPIC);
  t.is(status, 200);
  t.regex(headers.get('request-id') ?? '', REQUEST_ID);
  t.deepEqual(body, {
    data: [
      { type: 'model', id: 'echo-1', display_name: 'echo-1', created_at: '2025-04-07T04:26:40Z' },
      { type: 'model', id: 'claude-test', display_name: 'claude-test', created_at: '2025-04-07T04:30:00Z' },
    ],
    has_more: false,
    first_id: 'echo-1',
    last_id: 'claude-test',
  });
});

test('GET /v1/models with anthropic-version pages by limit, after_id and before_id', async (t) => {
  const key = await gateway.keyFor(['models:read']);
  const page = async (query: string) => (await get(`/v1/models?${query}`, key, ANTHROPIC)).body;
  const first = await page('limit=2');
  t.deepEqual(ids(first), ['echo-1', 'gpt-test']);
  t.like(first, { has_more: true, first_id: 'echo-1', last_id: 'gpt-test' });
  const second = await page(`limit=2&after_id=${first.last_id as string}`);
  t.deepEqual(ids(second), ['claude-test', 'acme/llama-3.1-8b']);
  t.true(second.has_more);
  const last = await page(`limit=2&after_id=${encodeURIComponent(second.last_id as string)}`);
  t.deepEqual(ids(last), ['m4', 'm5']);
  t.false(last.has_more);
  t.deepEqual(await page('after_id=m5'), { data: [], has_more: false, first_id: null, last_id: null });

  const before = await page('limit=2&before_id=m4');
  t.deepEqual(ids(before), ['claude-test', 'acme/llama-3.1-8b']);
  t.true(before.has_more);
  const start = await page('limit=2&before_id=claude-test');
  t.deepEqual(ids(start), ['echo-1', 'gpt-test']);
  t.false(start.has_more);
  t.deepEqual(ids(await page('')), ['echo-1', 'gpt-test', 'claude-test', 'acme/llama-3.1-8b', 'm4', 'm5']);
});

test('GET /v1/models with anthropic-version: a bad limit or cursor is 400 in Shape B; cursors never reveal models outside the list', async (t) => {
  const key = await gateway.keyFor(['models:read'], { models: ['echo-1'] });
  for (const query of ['limit=0', 'limit=1001', 'limit=x', 'limit=1&limit=2', 'after_id=echo-1&before_id=echo-1', 'after_id=gpt-test', 'before_id=nope']) {
    const { status, headers, body } = await get(`/v1/models?${query}`, key, ANTHROPIC);
    t.is(status, 400, query);
    t.like(body, { type: 'error', error: { type: 'invalid_request_error' }, request_id: headers.get('request-id') }, query);
  }
  // The OpenAI shape has no paging: the same query is ignored.
  t.is((await get('/v1/models?limit=0', key)).status, 200);
});

test('with anthropic-version, /v1/models refusals are in Shape B with request-id, 401 included', async (t) => {
  const response = await get('/v1/models', 'kmg_sk_unknown', ANTHROPIC);
  t.is(response.status, 401);
  t.deepEqual(response.body, { type: 'error', error: { type: 'authentication_error', message: 'Invalid API key' }, request_id: response.headers.get('request-id') });
  const openAI = await get('/v1/models', 'kmg_sk_unknown');
  t.like(openAI.body, { error: { code: 'invalid_api_key' } });
});
