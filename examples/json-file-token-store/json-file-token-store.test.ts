import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { adminTokenStoreContract } from 'koa-model-gateway/testing';
import { JsonFileTokenStore } from './index.js';

// A store written outside lib/ runs the package's own contract suite, imported by the package's name.
const directories: string[] = [];
test.after.always(() => Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true }))));

adminTokenStoreContract(test, 'JsonFileTokenStore', async () => {
  const directory = await mkdtemp(join(tmpdir(), 'kmg-json-tokens-'));
  directories.push(directory);
  return new JsonFileTokenStore(join(directory, 'admin-tokens.json'));
});

test('JsonFileTokenStore: a second store on the same file finds the tokens of the first, revocations included', async (t) => {
  const directory = await mkdtemp(join(tmpdir(), 'kmg-json-tokens-'));
  directories.push(directory);
  const path = join(directory, 'admin-tokens.json');
  const first = new JsonFileTokenStore(path);
  const record = await first.create({ hash: 'a'.repeat(64), name: 'ops' });
  t.true(await first.revoke(record.id));
  t.deepEqual(await new JsonFileTokenStore(path).list(), [await first.get(record.id)]);
});
