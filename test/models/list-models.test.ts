import test from 'ava';
import { modelsApp } from '../helpers/models-app.js';

const gateway = await modelsApp();
test.after.always(() => gateway.close());

const list = async (key: string) => {
  const response = await fetch(`${gateway.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
  return { status: response.status, requestId: response.headers.get('x-request-id'), body: (await response.json()) as unknown };
};

test('a key without allowlist sees the whole catalog, in catalog order', async (t) => {
  const { status, requestId, body } = await list(await gateway.keyFor(['models:read']));
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
  const { body } = await list(await gateway.keyFor(['models:read'], { models: ['claude-test', 'echo-1', 'not-in-catalog'] }));
  t.deepEqual(body, {
    object: 'list',
    data: [
      { id: 'echo-1', object: 'model', created: 1_744_000_000, owned_by: 'local' },
      { id: 'claude-test', object: 'model', created: 1_744_000_200, owned_by: 'anthropic' },
    ],
  });
});

test('an empty allowlist sees no model', async (t) => {
  t.deepEqual((await list(await gateway.keyFor(['models:read'], { models: [] }))).body, { object: 'list', data: [] });
});

test('listing needs models:read', async (t) => {
  const { status, body } = await list(await gateway.keyFor(['chat:completions']));
  t.is(status, 403);
  t.deepEqual(body, { error: { message: 'Forbidden', type: 'permission_error', param: null, code: 'forbidden' } });
});
