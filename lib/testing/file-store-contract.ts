import type { StoreContractTest } from './store-contract-test.js';
import type { FileRecord, FileStore, StockLimits } from '../files/file-store.js';
import { newFileId } from '../files/file-id.js';

const NOW = 1_800_000_000;
/**
 * The time a store is asked at: a whole second plus a fraction, as a `Date.now() / 1000` clock
 * gives it. Files' own times are whole seconds; a store must take the fraction (PostgreSQL's
 * bigint columns refuse it) and answer as at the whole second.
 */
const at = (seconds: number) => seconds + 0.375;
const ROOMY: StockLimits = { maxFiles: 1_000_000, maxBytes: Number.MAX_SAFE_INTEGER };

const record = (account: string, overrides: Partial<FileRecord> = {}): FileRecord => ({
  id: newFileId(NOW),
  account,
  filename: 'report.pdf',
  bytes: 1000,
  createdAt: NOW,
  expiresAt: null,
  ...overrides,
});

/** An id made of one character repeated: a fixed position in byte order. */
const idOf = (char: string) => `file-${char.repeat(32)}`;

const byteOrder = (ids: Iterable<string>) => [...ids].sort(); // ASCII ids: UTF-16 order is byte order

export interface FileStoreContractOptions {
  /** Puts many records in place at once, bypassing `create` (default: `create` one by one). */
  seed?: (store: FileStore, files: FileRecord[]) => Promise<void>;
}

async function createAll(store: FileStore, files: FileRecord[]): Promise<void> {
  for (const file of files) {
    if (!(await store.create(file, ROOMY, at(NOW)))) throw new Error(`${file.id} was refused`);
  }
}

/** The behaviour every FileStore must have; run once per implementation. */
export function fileStoreContract(test: StoreContractTest, name: string, makeStore: () => Promise<FileStore>, options: FileStoreContractOptions = {}): void {
  const seed = options.seed ?? createAll;
  const ids = (files: FileRecord[]) => files.map((file) => file.id);

  test(`${name}: a created file is found by its account, with everything it was created with`, async (t) => {
    const store = await makeStore();
    const forever = record('acme', { filename: 'Ünïcode name.pdf', bytes: 26_214_400 });
    const expiring = record('acme', { expiresAt: NOW + 3600 });
    t.true(await store.create(forever, ROOMY, at(NOW)));
    t.true(await store.create(expiring, ROOMY, at(NOW)));
    t.deepEqual(await store.get('acme', forever.id, at(NOW)), forever);
    t.deepEqual(await store.get('acme', expiring.id, at(NOW)), expiring);
  });

  test(`${name}: another account, or an id never created, finds nothing`, async (t) => {
    const store = await makeStore();
    const file = record('acme');
    await store.create(file, ROOMY, at(NOW));
    t.is(await store.get('other', file.id, at(NOW)), undefined);
    t.is(await store.get('acme', newFileId(NOW), at(NOW)), undefined);
  });

  test(`${name}: two files never share an id`, async (t) => {
    const store = await makeStore();
    const file = record('acme');
    await store.create(file, ROOMY, at(NOW));
    await t.throwsAsync(store.create({ ...file, account: 'other' }, ROOMY, at(NOW)), { any: true });
    t.deepEqual(await store.get('acme', file.id, at(NOW)), file);
  });

  test(`${name}: records handed out and taken in are copies`, async (t) => {
    const store = await makeStore();
    const file = record('acme');
    const original = { ...file };
    await store.create(file, ROOMY, at(NOW));
    file.filename = 'changed-after-create.pdf';
    const found = await store.get('acme', file.id, at(NOW));
    if (found) found.bytes = 1;
    const listed = (await store.list('acme', { order: 'asc', limit: 10 }, at(NOW))).files[0];
    if (listed) listed.filename = 'changed-after-list.pdf';
    t.deepEqual(await store.get('acme', file.id, at(NOW)), original);
  });

  test(`${name}: list is in byte order of ids, asc or desc`, async (t) => {
    const store = await makeStore();
    // '-' < '0' < 'A' < 'Z' < '_' < 'a' < 'z' in bytes; a locale collation would order them otherwise.
    const chars = ['z', '_', 'A', '-', 'a', '0', 'Z'];
    for (const char of chars) await store.create(record('acme', { id: idOf(char) }), ROOMY, at(NOW));
    const expected = ['-', '0', 'A', 'Z', '_', 'a', 'z'].map(idOf);
    const asc = await store.list('acme', { order: 'asc', limit: 100 }, at(NOW));
    t.deepEqual(ids(asc.files), expected);
    t.false(asc.hasMore);
    const desc = await store.list('acme', { order: 'desc', limit: 100 }, at(NOW));
    t.deepEqual(ids(desc.files), expected.toReversed());
  });

  test(`${name}: list pages follow one another through 'after', and hasMore is exact`, async (t) => {
    const store = await makeStore();
    const files = Array.from({ length: 5 }, (_, i) => record('acme', { id: newFileId(NOW + i), createdAt: NOW + i }));
    for (const file of files.toReversed()) await store.create(file, ROOMY, at(NOW));
    const all = ids(files);
    t.deepEqual(all, byteOrder(all), 'ids follow creation time');

    const page = async (order: 'asc' | 'desc', limit: number, after?: string) => {
      const result = await store.list('acme', after === undefined ? { order, limit } : { order, limit, after }, at(NOW));
      return { ids: ids(result.files), hasMore: result.hasMore };
    };
    t.deepEqual(await page('asc', 2), { ids: all.slice(0, 2), hasMore: true });
    t.deepEqual(await page('asc', 2, all[1]), { ids: all.slice(2, 4), hasMore: true });
    t.deepEqual(await page('asc', 2, all[3]), { ids: all.slice(4), hasMore: false });
    t.deepEqual(await page('asc', 2, all[2]), { ids: all.slice(3), hasMore: false }, 'a full last page has no more');
    t.deepEqual(await page('asc', 5), { ids: all, hasMore: false });
    t.deepEqual(await page('asc', 4), { ids: all.slice(0, 4), hasMore: true });
    t.deepEqual(await page('asc', 1, all[4]), { ids: [], hasMore: false });

    const reversed = all.toReversed();
    t.deepEqual(await page('desc', 2), { ids: reversed.slice(0, 2), hasMore: true });
    t.deepEqual(await page('desc', 2, reversed[1]), { ids: reversed.slice(2, 4), hasMore: true });
    t.deepEqual(await page('desc', 2, reversed[3]), { ids: reversed.slice(4), hasMore: false });
    t.deepEqual(await page('desc', 3, reversed[1]), { ids: reversed.slice(2), hasMore: false });
    t.deepEqual(await page('desc', 1, reversed[4]), { ids: [], hasMore: false });
  });

  test(`${name}: 'after' is a position: deleted, foreign and never-created ids work alike`, async (t) => {
    const store = await makeStore();
    for (const char of ['B', 'D', 'F', 'H']) await store.create(record('acme', { id: idOf(char) }), ROOMY, at(NOW));
    await store.create(record('other', { id: idOf('E') }), ROOMY, at(NOW));
    t.true(await store.delete('acme', idOf('D'), at(NOW)));

    const after = async (order: 'asc' | 'desc', id: string) => ids((await store.list('acme', { order, limit: 10, after: id }, at(NOW))).files);
    t.deepEqual(await after('asc', idOf('D')), [idOf('F'), idOf('H')], 'deleted');
    t.deepEqual(await after('asc', idOf('E')), [idOf('F'), idOf('H')], 'another account');
    t.deepEqual(await after('asc', idOf('C')), [idOf('F'), idOf('H')], 'never created');
    t.deepEqual(await after('desc', idOf('E')), [idOf('B')]);
    t.deepEqual(await after('desc', idOf('G')), [idOf('F'), idOf('B')]);
    t.deepEqual(await after('asc', idOf('z')), []);
    t.deepEqual(await after('desc', idOf('-')), []);
    t.deepEqual(await after('asc', idOf('-')), [idOf('B'), idOf('F'), idOf('H')]);
  });

  test(`${name}: list holds only the account's live files`, async (t) => {
    const store = await makeStore();
    const mine = record('acme');
    const expiring = record('acme', { expiresAt: NOW + 10 });
    await store.create(mine, ROOMY, at(NOW));
    await store.create(expiring, ROOMY, at(NOW));
    await store.create(record('other'), ROOMY, at(NOW));
    const listed = async (now: number) => ids((await store.list('acme', { order: 'asc', limit: 10 }, now)).files);
    t.deepEqual(await listed(at(NOW + 9)), byteOrder([mine.id, expiring.id]));
    t.deepEqual(await listed(at(NOW + 10)), [mine.id]);
    const page = await store.list('acme', { order: 'asc', limit: 1 }, at(NOW + 10));
    t.false(page.hasMore, 'an expired file is not "more"');
    t.deepEqual(await store.list('nobody', { order: 'desc', limit: 10 }, at(NOW)), { files: [], hasMore: false });
  });

  test(`${name}: a file is gone from get, list, delete and usage the second it expires`, async (t) => {
    const store = await makeStore();
    const file = record('acme', { bytes: 500, expiresAt: NOW + 100 });
    await store.create(file, ROOMY, at(NOW));
    t.deepEqual(await store.get('acme', file.id, at(NOW + 99)), file);
    t.deepEqual(await store.usage('acme', at(NOW + 99)), { files: 1, bytes: 500 });

    t.is(await store.get('acme', file.id, at(NOW + 100)), undefined);
    t.deepEqual(await store.list('acme', { order: 'desc', limit: 10 }, at(NOW + 100)), { files: [], hasMore: false });
    t.deepEqual(await store.usage('acme', at(NOW + 100)), { files: 0, bytes: 0 });
    t.false(await store.delete('acme', file.id, at(NOW + 100)));
    t.deepEqual(byteOrder(await store.existing([file.id])), [file.id], 'the record stays until the sweep');
  });

  test(`${name}: a fractional now (a Date.now() / 1000 clock) works and expires at the same instant`, async (t) => {
    const store = await makeStore();
    const file = record('acme', { bytes: 500, expiresAt: NOW + 100 });
    t.true(await store.create(file, ROOMY, NOW + 0.25));
    t.deepEqual(await store.get('acme', file.id, NOW + 99.999), file);
    t.deepEqual(await store.usage('acme', NOW + 99.5), { files: 1, bytes: 500 });
    t.is((await store.list('acme', { order: 'asc', limit: 10 }, NOW + 99.5)).files.length, 1);
    t.is(await store.get('acme', file.id, NOW + 100.5), undefined);
    t.deepEqual(await store.removeExpired(NOW + 100.5, 10), [file]);
  });

  test(`${name}: delete removes a live file of the account once`, async (t) => {
    const store = await makeStore();
    const file = record('acme', { bytes: 700 });
    const kept = record('acme', { bytes: 300 });
    await store.create(file, ROOMY, at(NOW));
    await store.create(kept, ROOMY, at(NOW));

    t.false(await store.delete('other', file.id, at(NOW)), 'another account');
    t.deepEqual(await store.get('acme', file.id, at(NOW)), file);
    t.false(await store.delete('acme', newFileId(NOW), at(NOW)), 'never created');

    t.true(await store.delete('acme', file.id, at(NOW)));
    t.is(await store.get('acme', file.id, at(NOW)), undefined);
    t.false(await store.delete('acme', file.id, at(NOW)), 'already deleted');
    t.deepEqual(await store.usage('acme', at(NOW)), { files: 1, bytes: 300 });
    t.deepEqual(ids((await store.list('acme', { order: 'asc', limit: 10 }, at(NOW))).files), [kept.id]);
    t.deepEqual(byteOrder(await store.existing([file.id, kept.id])), [kept.id]);
  });

  test(`${name}: usage counts the account's live files and their bytes`, async (t) => {
    const store = await makeStore();
    await store.create(record('acme', { bytes: 100 }), ROOMY, at(NOW));
    await store.create(record('acme', { bytes: 26_214_400 }), ROOMY, at(NOW));
    await store.create(record('acme', { bytes: 1, expiresAt: NOW + 5 }), ROOMY, at(NOW));
    await store.create(record('other', { bytes: 5000 }), ROOMY, at(NOW));
    t.deepEqual(await store.usage('acme', at(NOW)), { files: 3, bytes: 26_214_501 });
    t.deepEqual(await store.usage('acme', at(NOW + 5)), { files: 2, bytes: 26_214_500 });
    t.deepEqual(await store.usage('other', at(NOW)), { files: 1, bytes: 5000 });
    t.deepEqual(await store.usage('nobody', at(NOW)), { files: 0, bytes: 0 });
  });

  test(`${name}: create refuses a file past maxFiles and keeps nothing of it`, async (t) => {
    const store = await makeStore();
    const limits = { maxFiles: 2, maxBytes: 1_000_000 };
    t.true(await store.create(record('acme'), limits, at(NOW)));
    t.true(await store.create(record('acme'), limits, at(NOW)));
    const refused = record('acme');
    t.false(await store.create(refused, limits, at(NOW)));
    t.is(await store.get('acme', refused.id, at(NOW)), undefined);
    t.is((await store.existing([refused.id])).size, 0);
    t.deepEqual(await store.usage('acme', at(NOW)), { files: 2, bytes: 2000 });
    t.true(await store.create(record('other'), limits, at(NOW)), 'limits are per account');
  });

  test(`${name}: maxBytes is exact: the remaining bytes fit, one byte more does not`, async (t) => {
    const store = await makeStore();
    const limits = { maxFiles: 100, maxBytes: 100_000_000 };
    t.true(await store.create(record('acme', { bytes: 99_000_000 }), limits, at(NOW)));
    t.false(await store.create(record('acme', { bytes: 1_000_001 }), limits, at(NOW)));
    t.true(await store.create(record('acme', { bytes: 1_000_000 }), limits, at(NOW)));
    t.deepEqual(await store.usage('acme', at(NOW)), { files: 2, bytes: 100_000_000 });
    t.false(await store.create(record('acme', { bytes: 1 }), limits, at(NOW)));
    t.true(await store.create(record('acme', { bytes: 0 }), limits, at(NOW)), 'an empty file adds no bytes');
  });

  test(`${name}: expired files stop counting toward the limits at once`, async (t) => {
    const store = await makeStore();
    const limits = { maxFiles: 2, maxBytes: 1000 };
    t.true(await store.create(record('acme', { bytes: 600, expiresAt: NOW + 60 }), limits, at(NOW)));
    t.true(await store.create(record('acme', { bytes: 400 }), limits, at(NOW)));
    t.false(await store.create(record('acme', { bytes: 1 }), limits, at(NOW + 59)));
    t.true(await store.create(record('acme', { bytes: 600 }), limits, at(NOW + 60)));
  });

  test(`${name}: 50 parallel creations with maxFiles 10 create exactly 10`, async (t) => {
    const store = await makeStore();
    const limits = { maxFiles: 10, maxBytes: 1_000_000 };
    const files = Array.from({ length: 50 }, () => record('acme', { bytes: 100 }));
    const results = await Promise.all(files.map((file) => store.create(file, limits, at(NOW))));
    t.is(results.filter(Boolean).length, 10);
    t.deepEqual(await store.usage('acme', at(NOW)), { files: 10, bytes: 1000 });
    const created = files.filter((_, i) => results[i]);
    t.deepEqual(ids((await store.list('acme', { order: 'asc', limit: 100 }, at(NOW))).files), byteOrder(ids(created)));
  });

  test(`${name}: parallel creations near maxBytes never leave the account over it`, async (t) => {
    const store = await makeStore();
    const limits = { maxFiles: 1000, maxBytes: 100_000 };
    await store.create(record('acme', { bytes: 90_000 }), limits, at(NOW));
    const sizes = Array.from({ length: 40 }, (_, i) => 1 + ((i * 7919) % 1500));
    const files = sizes.map((bytes) => record('acme', { bytes }));
    const results = await Promise.all(files.map((file) => store.create(file, limits, at(NOW))));
    const usage = await store.usage('acme', at(NOW));
    const createdBytes = sizes.filter((_, i) => results[i]).reduce((sum, bytes) => sum + bytes, 0);
    t.true(usage.bytes <= limits.maxBytes, `${usage.bytes} bytes kept`);
    t.deepEqual(usage, { files: 1 + results.filter(Boolean).length, bytes: 90_000 + createdBytes });
    // Usage only grew, so every refusal must still be justified at the end.
    for (const [i, bytes] of sizes.entries()) {
      if (!results[i]) t.true(usage.bytes + bytes > limits.maxBytes, `a file of ${bytes} bytes was refused needlessly`);
    }
  });

  test(`${name}: removeExpired removes up to max expired records and returns them`, async (t) => {
    const store = await makeStore();
    const expired = Array.from({ length: 5 }, (_, i) => record(i % 2 ? 'acme' : 'other', { expiresAt: NOW + 1 + i }));
    const live = [record('acme'), record('acme', { expiresAt: NOW + 11 })];
    for (const file of [...expired, ...live]) await store.create(file, ROOMY, at(NOW));

    const first = await store.removeExpired(at(NOW + 10), 3);
    t.is(first.length, 3);
    const second = await store.removeExpired(at(NOW + 10), 3);
    t.is(second.length, 2);
    t.deepEqual(await store.removeExpired(at(NOW + 10), 3), []);
    const byId = (a: FileRecord, b: FileRecord) => (a.id < b.id ? -1 : 1);
    t.deepEqual([...first, ...second].sort(byId), [...expired].sort(byId), 'whole records, each once');

    t.deepEqual(byteOrder(await store.existing([...ids(expired), ...ids(live)])), byteOrder(ids(live)));
    t.deepEqual(await store.usage('acme', at(NOW + 10)), { files: 2, bytes: 2000 });
    t.deepEqual(ids(await store.removeExpired(at(NOW + 11), 10)), [live[1]?.id], 'expiresAt equal to now is expired');
  });

  test(`${name}: existing tells which ids have a record, expired or not, any account`, async (t) => {
    const store = await makeStore();
    const live = record('acme');
    const expired = record('acme', { expiresAt: NOW + 1 });
    const foreign = record('other');
    const deleted = record('acme');
    for (const file of [live, expired, foreign, deleted]) await store.create(file, ROOMY, at(NOW));
    await store.delete('acme', deleted.id, at(NOW));
    const never = Array.from({ length: 2500 }, () => newFileId(NOW));
    const found = await store.existing([...never.slice(0, 1500), live.id, expired.id, foreign.id, deleted.id, ...never.slice(1500)]);
    t.deepEqual(byteOrder(found), byteOrder([live.id, expired.id, foreign.id]));
    t.is((await store.existing([])).size, 0);
  });

  test(`${name}: 10,000 files of one account page exactly at the largest page size`, async (t) => {
    const store = await makeStore();
    const files = Array.from({ length: 10_000 }, (_, i) => record('big', { id: newFileId(NOW - 10_000 + i), createdAt: NOW - 10_000 + i, bytes: i }));
    await seed(store, [...files, record('neighbour'), record('big', { expiresAt: NOW })]);
    const all = ids(files);

    const desc = await store.list('big', { order: 'desc', limit: 10_000 }, at(NOW));
    t.false(desc.hasMore);
    t.deepEqual(ids(desc.files), all.toReversed());
    t.deepEqual(desc.files[0], files[9_999]);

    const asc = await store.list('big', { order: 'asc', limit: 9_999 }, at(NOW));
    t.true(asc.hasMore);
    const rest = await store.list('big', { order: 'asc', limit: 10_000, after: asc.files.at(-1)?.id ?? '' }, at(NOW));
    t.deepEqual(ids(rest.files), [all[9_999]]);
    t.false(rest.hasMore);

    const middle = await store.list('big', { order: 'desc', limit: 100, after: all[5_000] ?? '' }, at(NOW));
    t.deepEqual(ids(middle.files), all.slice(4_900, 5_000).toReversed());
    t.true(middle.hasMore);
    t.deepEqual(await store.usage('big', at(NOW)), { files: 10_000, bytes: (9_999 * 10_000) / 2 });
  });
}
