import test from 'ava';
import type { FileStore } from '../../lib/files/file-store.js';
import { newFileId } from '../../lib/files/file-id.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { modelsApp } from '../helpers/models-app.js';

/** A file store that counts its lookups by id. */
function countingStore(): { files: FileStore; lookups: () => number } {
  const inner = new MemoryFileStore();
  let lookups = 0;
  const files: FileStore = Object.assign(Object.create(inner) as FileStore, {
    get: (...args: Parameters<FileStore['get']>) => {
      lookups += 1;
      return inner.get(...args);
    },
  });
  return { files, lookups: () => lookups };
}

const { files, lookups } = countingStore();
const gateway = await modelsApp({ files, blobs: new MemoryBlobStore() });
test.after.always(() => gateway.close());

test('a body naming thousands of unknown file ids costs one store lookup, not one per id', async (t) => {
  const key = await gateway.keyFor();
  const now = Math.floor(Date.now() / 1000);
  const parts = Array.from({ length: 5000 }, () => ({ type: 'file', file: { file_id: newFileId(now) } }));
  const before = lookups();
  const response = await gateway.post('/v1/chat/completions', { model: 'echo-1', messages: [{ role: 'user', content: parts }] }, { authorization: `Bearer ${key}` });
  t.is(response.status, 404);
  t.like(await response.json(), { error: { code: 'file_not_found' } });
  t.is(lookups() - before, 1);
});
