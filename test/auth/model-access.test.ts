import test from 'ava';
import { modelAccess, visibleModels } from '../../lib/auth/model-access.js';

const catalog = [{ id: 'gpt-4.1' }, { id: 'gpt-4.1-mini' }, { id: 'claude-sonnet' }];
const ids = new Set(catalog.map((model) => model.id));

const cases: Array<[string, string[] | null, string, ReturnType<typeof modelAccess>]> = [
  ['no list: a catalog model', null, 'gpt-4.1', 'allowed'],
  ['no list: a model outside the catalog', null, 'gpt-5', 'unknown'],
  ['listed and in the catalog', ['gpt-4.1'], 'gpt-4.1', 'allowed'],
  ['not listed but in the catalog', ['gpt-4.1'], 'claude-sonnet', 'not_allowed'],
  ['not listed and not in the catalog', ['gpt-4.1'], 'gpt-5', 'not_allowed'],
  ['listed but not in the catalog', ['gpt-5'], 'gpt-5', 'unknown'],
  ['ids match exactly, not by prefix', ['gpt-4.1'], 'gpt-4.1-mini', 'not_allowed'],
  ['a listed prefix does not widen', ['gpt'], 'gpt-4.1', 'not_allowed'],
  ['no wildcard', ['*'], 'gpt-4.1', 'not_allowed'],
  ['case matters', ['GPT-4.1'], 'gpt-4.1', 'not_allowed'],
  ['an empty list allows nothing', [], 'gpt-4.1', 'not_allowed'],
];

for (const [title, models, model, expected] of cases) {
  test(`modelAccess: ${title}`, (t) => {
    t.is(modelAccess({ models }, ids, model), expected);
  });
}

test('visibleModels: no list sees the whole catalog in order', (t) => {
  t.deepEqual(visibleModels({ models: null }, catalog), catalog);
});

test('visibleModels: a list sees only its catalog models, in catalog order', (t) => {
  t.deepEqual(visibleModels({ models: ['claude-sonnet', 'gpt-4.1', 'gpt-5'] }, catalog), [{ id: 'gpt-4.1' }, { id: 'claude-sonnet' }]);
  t.deepEqual(visibleModels({ models: [] }, catalog), []);
});
